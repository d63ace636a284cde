import { request } from 'undici'
import type { Config } from '../config-schema.js'
import { checksumAddress } from '../protocol/address.js'
import type { Reachability } from '../routing/reachability.js'
import { isUnreached } from '../providers/unreached.js'

const PROBE_TIMEOUT_MS = 5_000

/**
 * Asks each configured provider (and the managed vendor) for its model list once, at start: any HTTP answer means it
 * can be reached; a connection that cannot be made is told to `reachability`, so an operator sees it at once.
 */
export async function probeProviders(config: Config, reachability: Reachability): Promise<void> {
  const endpoints = config.providers.map((p) => ({ provider: checksumAddress(p.address), baseUrl: p.baseUrl }))
  if (config.managed) endpoints.push({ provider: 'managed', baseUrl: config.managed.baseUrl })
  await Promise.all(
    endpoints.map(async ({ provider, baseUrl }) => {
      try {
        const res = await request(`${baseUrl.replace(/\/$/, '')}/models`, {
          headersTimeout: PROBE_TIMEOUT_MS,
          bodyTimeout: PROBE_TIMEOUT_MS,
          signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
        })
        await res.body.dump()
        reachability.reached(provider)
      } catch (err) {
        const code = (err as { code?: string }).code
        if (isUnreached(code)) reachability.unreachable(provider, `upstream connection failed: ${code}`)
      }
    }),
  )
}
