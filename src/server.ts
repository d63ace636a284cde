import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import type { Config } from './config-schema.js'
import { buildApp, type AppPlugin } from './api/app.js'
import { Gateway, type GatewayOptions } from './gateway/gateway.js'
import { openStore } from './store/open.js'
import type { Store } from './store/store.js'
import { makeRail } from './settlement/rails.js'
import type { Rail } from './settlement/rail.js'
import { Settler, type SettleReport } from './settlement/settler.js'
import { formatUsdc } from './money/usdc.js'
import { serveMetrics } from './ops/metrics-server.js'
import { portalPlugin, type PortalOptions } from './portal/plugin.js'
import { ReceiptBook } from './receipts/book.js'
import { loadReceiptKey, type ReceiptKey } from './receipts/key.js'
import type { WorkerLink } from './ops/workers/worker-link.js'
import { readinessProblems } from './gateway/readiness.js'
import { loadSecretBox, type SecretBox } from './store/secret-box.js'

export interface RunningServer {
  url: string
  app: FastifyInstance
  gateway: Gateway
  store: Store
  /** Signs and proves the requests' receipts. */
  receipts: ReceiptBook
  settler: Settler
  rail: Rail
  /** Where `GET /metrics` is served, unless the config turns it off or its port was taken. */
  metricsUrl?: string
  close(): Promise<void>
}

export interface ServerOptions extends GatewayOptions {
  /** An already open store (tests share one); otherwise the config's store is opened and closed with the server. */
  store?: Store
  plugins?: AppPlugin[]
  portal?: PortalOptions
  /**
   * This process is a worker of `svc serve --workers N`: its metrics go to the primary's `/metrics`, and `/readyz`
   * answers for every worker.
   */
  worker?: WorkerLink
  /** The receipt key, already loaded (a worker's, when the primary made one for the whole server). */
  receiptKey?: ReceiptKey
}

/** Composition root: open the store, start the gateway, build the app, listen. */
export async function startServer(config: Config, opts: ServerOptions = {}): Promise<RunningServer> {
  // The receipt and secrets keys first: a missing or malformed one stops the start before anything opens.
  const key = opts.receiptKey ?? loadReceiptKey(config)
  const secrets = loadSecretBox(config)
  const store = opts.store ?? (await openStore(config.store, opts.now))
  store.providers.keys.use(secrets)
  // The rail first: a missing operator key or a wrong chain stops the start before anything runs.
  const rail = await makeRail(config, store, { now: opts.now, log: opts.log }).catch(async (err: unknown) => {
    if (!opts.store) await store.close()
    throw err
  })
  const gateway = await Gateway.start(config, store, { ...opts, ...(rail.x402 ? { x402Relay: rail.x402 } : {}) })
  await sealEndpointKeys(store, secrets, gateway.log)
  if (key.ephemeral)
    gateway.log(
      `receipts are signed by ${key.account.address}, a key made for this process: they verify only while it runs. ` +
        'Set SVC_RECEIPT_KEY or receipts.keyFile (README, "Receipts")',
    )
  const receipts = new ReceiptBook(store.receipts, key, rail.receiptDomain, rail.kind)
  const app = await buildApp(gateway, receipts, [portalPlugin(opts.portal, receipts), ...(opts.plugins ?? [])])
  await rail.start?.()
  const settler = new Settler(store, rail, gateway.now)
  settler.onPass = (pass) => reportPass(gateway, pass)
  settler.start(gateway.tuning.settleIntervalMs, (err) => gateway.log('settlement pass failed', err))
  await app.listen({ host: config.listen?.host ?? '127.0.0.1', port: config.listen?.port ?? 8080 })
  const addr = app.server.address() as AddressInfo
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address
  const { worker } = opts
  if (worker) {
    worker.answerReadiness(() => readinessProblems(gateway))
    gateway.readiness = () => worker.serverProblems()
    if (config.metrics !== false) worker.shareMetrics(gateway.metrics.registry)
  }
  const metrics =
    config.metrics === false || worker
      ? undefined
      : await serveMetrics(gateway.metrics.registry, config.metrics ?? {}, (err) =>
          gateway.log(`metrics not served: ${err.message}; the gateway serves on`),
        )
  return {
    url: `http://${host}:${addr.port}`,
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    app,
    gateway,
    store,
    receipts,
    settler,
    rail,
    close: once(async () => {
      await metrics?.close()
      await rail.close?.()
      await settler.stop()
      gateway.stopping = true
      const inFlight = gateway.lifecycle.inFlight
      if (inFlight > 0)
        gateway.log(
          `stopping: ${requests(inFlight)} in flight, given up to ${gateway.tuning.shutdownGraceMs} ms to finish`,
        )
      await closeGently(app, gateway.tuning.shutdownGraceMs, () => {
        const cut = gateway.stopServing()
        if (cut > 0)
          gateway.log(
            `stopping: ${requests(cut)} still running after ${gateway.tuning.shutdownGraceMs} ms ended ` +
              '(answered as failures to retry, charged nothing)',
          )
      })
      // Requests whose connections closed still settle (capture what they delivered, or release) before the store goes.
      if (!(await gateway.lifecycle.drained(SETTLE_WAIT_MS)))
        gateway.log(`stopping with ${requests(gateway.lifecycle.inFlight)} unsettled; their holds are released`)
      await gateway.close()
      if (!opts.store) await store.close()
    }),
  }
}

/** A settlement pass in the log (a line per batch) and the metrics. */
function reportPass(gateway: Gateway, pass: SettleReport): void {
  gateway.metrics.settlementPass(pass)
  for (const b of pass.batches)
    gateway.logger.info(
      {
        batch_id: b.id,
        total_usdc: formatUsdc(b.total),
        legs: b.legs,
        failed_payers: b.failedPayers.length,
        deferred_payers: b.deferredPayers.length,
      },
      'settlement batch settled',
    )
  for (const u of pass.unfinished) gateway.logger.warn({ batch_id: u.id, why: u.why }, 'settlement batch unfinished')
}

const requests = (n: number) => `${n} request${n === 1 ? '' : 's'}`

/** How long requests may take to settle once their connections are closed, before the instance retires. */
const SETTLE_WAIT_MS = 5_000

/**
 * Stops the HTTP server: no new connection, idle connections closed, those whose requests are in flight closed as
 * each request ends (a new request on one is refused by the app while the gateway is stopping). After `graceMs`,
 * `ended` ends what is still being served (its answers go out); whatever is still open `ANSWER_MS` later is cut.
 */
async function closeGently(app: FastifyInstance, graceMs: number, ended: () => void): Promise<void> {
  const idle = setInterval(() => app.server.closeIdleConnections(), 20)
  let cut: NodeJS.Timeout | undefined
  const grace = setTimeout(() => {
    ended()
    cut = setTimeout(() => app.server.closeAllConnections(), ANSWER_MS)
  }, graceMs)
  try {
    await app.close()
  } finally {
    clearInterval(idle)
    clearTimeout(grace)
    clearTimeout(cut)
  }
}

/** How long the answers of requests ended at the grace's end may take to go out before their connections are cut. */
const ANSWER_MS = 1_000

/** `fn` run once; later calls get the first call's promise. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined
  return () => (running ??= fn())
}

/**
 * Seals with the current secrets key the providers' API keys stored before it (in plain text, or with a key since
 * rotated), or says how many lie in plain text while no key is set.
 */
async function sealEndpointKeys(store: Store, secrets: SecretBox | undefined, log: (msg: string) => void) {
  if (secrets) {
    const { sealed: n, unreadable } = await store.providers.keys.reseal()
    if (n > 0) log(`secrets: sealed ${n} provider API key${n === 1 ? '' : 's'} with the current secrets key`)
    for (const why of unreadable) log(`secrets: ${why}; its offers are left out`)
    return
  }
  const plain = await store.providers.keys.unsealed()
  if (plain > 0)
    log(
      `secrets: ${plain} provider API key${plain === 1 ? ' is' : 's are'} stored in plain text; set secrets.keyFile ` +
        '(or SVC_SECRETS_KEY) and restart to seal them (README, "Secrets")',
    )
}
