import { tuningOf, type Config, type Tuning } from '../config.js'
import { OpenAICompatibleProvider } from '../providers/openai-compatible.js'
import type { Provider } from '../providers/types.js'
import { Catalog } from '../routing/catalog.js'
import { Health } from '../routing/health.js'
import { executeRoute } from '../routing/route.js'
import type { StreamSink } from '../routing/failover.js'
import { SYSTEM_ACCOUNTS } from '../store/accounts.js'
import type { Store } from '../store/store.js'
import { KeyVerifier } from '../auth/verifier.js'
import { settle, type Finished, type SettleContext } from './settle.js'
import type { Caller } from './admission.js'
import type { Prepared } from './prepare.js'
import { InstanceLifecycle, newInstanceId } from './lifecycle.js'
import { checksumAddress } from '../accounts/address.js'
import type { Cancel } from '../providers/cancel.js'

export interface GatewayOptions {
  now?: () => number
  makeUpstream?: (baseUrl: string, apiKey: string | undefined, tuning: Tuning) => Provider
  log?: (msg: string, err?: unknown) => void
}

/** Everything a request needs, built once from the config: catalog, health, keys, store and the money accounts. */
export class Gateway {
  readonly tuning: Tuning
  readonly health: Health
  readonly catalog: Catalog
  readonly keys: KeyVerifier
  readonly lifecycle: InstanceLifecycle
  readonly now: () => number
  readonly log: (msg: string, err?: unknown) => void
  private settleCtx!: SettleContext
  private flushTimer: NodeJS.Timeout | undefined
  /** The server is stopping: requests in flight finish, new ones are refused (503, retry). */
  stopping = false
  /** The cancels of the requests being served. */
  private readonly serving = new Set<Cancel>()
  private servingStopped = false

  private constructor(readonly config: Config, readonly store: Store, opts: GatewayOptions) {
    this.tuning = tuningOf(config)
    this.now = opts.now ?? Date.now
    this.log = opts.log ?? ((msg, err) => (err === undefined ? console.error(msg) : console.error(msg, err)))
    const { breakerFailures, breakerCooldownMs } = this.tuning
    const breakerLine = { opened: `opened after ${breakerFailures} failures in a row`, reopened: 'opened again: its probe failed', closed: 'closed: an attempt succeeded' }
    this.health = new Health({
      failures: breakerFailures, cooldownMs: breakerCooldownMs,
      onChange: (key, change) => this.log(`offer ${key}: breaker ${breakerLine[change]}${change === 'closed' ? '' : `; next probe in ${Math.ceil(breakerCooldownMs / 1000)} s`}`),
    }, this.now)
    const make = opts.makeUpstream ?? ((url, key, t) => new OpenAICompatibleProvider(url, key, t))
    this.catalog = new Catalog(config, (url, key) => make(url, key, this.tuning))
    this.keys = new KeyVerifier(store, this.tuning.keyCacheMs, this.now)
    this.lifecycle = new InstanceLifecycle(store, newInstanceId(), this.tuning.holdTtlSeconds * 1000, this.now, (err) => this.log('background task failed', err))
  }

  /** Builds the gateway over an open store: provider accounts exist, this instance is registered, stale holds are released. */
  static async start(config: Config, store: Store, opts: GatewayOptions = {}): Promise<Gateway> {
    const gw = new Gateway(config, store, opts)
    const now = gw.now()
    const payees = new Map<string, number>()
    for (const p of config.providers) {
      const address = checksumAddress(p.address)
      payees.set(address, (await store.accounts.ensure(address, 'provider', now)).account.id)
    }
    const fees = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.fees))!.id
    const vendor = (await store.accounts.byAddress(SYSTEM_ACCOUNTS.vendor))!.id
    gw.settleCtx = { store, health: gw.health, feeBps: config.feeBps, accounts: { fees, vendor, payees }, now: gw.now, log: (msg) => gw.log(msg) }
    await gw.lifecycle.start()
    gw.flushTimer = setInterval(() => gw.keys.flushLastUsed().catch((err) => gw.log('key flush failed', err)), 5_000)
    gw.flushTimer.unref()
    return gw
  }

  get accounts(): SettleContext['accounts'] {
    return this.settleCtx.accounts
  }

  /** Serves an admitted request through its plan and settles its money. */
  async run(caller: Caller, prepared: Prepared, hold: bigint, requestId: string, startedAt: number, sink: StreamSink | undefined, cancel: Cancel): Promise<Finished> {
    this.serving.add(cancel)
    // One that reaches its upstream after the grace ended (its body or hold came late) is ended at once, the same way.
    if (this.servingStopped) cancel.abort('stopping')
    try {
      const outcome = await executeRoute(prepared.plan, prepared.calls, {
        cancel, health: this.health, now: this.now, ...(sink ? { sink } : {}),
      })
      if (outcome.kind === 'delivered') sink?.complete(outcome.reply)
      return await settle(this.settleCtx, { requestId, caller, prepared, hold, startedAt, stopped: cancel.cause === 'stopping' }, outcome)
    } finally {
      this.serving.delete(cancel)
    }
  }

  /**
   * The stop's grace is over: requests still being served end now, each answered as a failure to retry (a stream with
   * an error chunk and [DONE], a plain request with 503) and charged nothing. How many there were.
   */
  stopServing(): number {
    this.servingStopped = true
    const n = this.serving.size
    for (const cancel of this.serving) cancel.abort('stopping')
    return n
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearInterval(this.flushTimer)
    await this.keys.flushLastUsed().catch(() => {})
    await this.lifecycle.stop().catch(() => {})
    await this.catalog.close()
  }
}
