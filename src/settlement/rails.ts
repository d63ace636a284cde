import type { Config } from '../config.js'
import type { Store } from '../store/store.js'
import { LocalRail, type Rail } from './rail.js'
import { createEvmRail, type EvmRailOptions } from './evm-rail.js'

/** The rail named by the config. */
export async function makeRail(config: Config, store: Store, opts: EvmRailOptions = {}): Promise<Rail> {
  if (config.rail.kind === 'local') return new LocalRail()
  return createEvmRail(config.rail, store, opts)
}
