import type { Config } from '../config-schema.js'
import type { Store } from '../store/store.js'
import { LocalRail, type Rail } from './rail.js'
import type { EvmRailOptions } from './evm-rail.js'

/** The rail named by the config. The evm rail (viem) loads only when configured. */
export async function makeRail(config: Config, store: Store, opts: EvmRailOptions = {}): Promise<Rail> {
  if (config.rail.kind === 'local') return new LocalRail()
  const { createEvmRail } = await import('./evm-rail.js')
  return createEvmRail(config.rail, store, opts)
}
