import type { Config } from '../config.js'
import { LocalRail, type Rail } from './rail.js'

/** The rail named by the config. */
export async function makeRail(config: Config): Promise<Rail> {
  if (config.rail.kind === 'local') return new LocalRail()
  throw new Error(`rail ${config.rail.kind} is not available in this build`)
}
