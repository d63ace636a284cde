import cluster from 'node:cluster'
import { availableParallelism } from 'node:os'
import type { Command } from 'commander'
import { action, common, CliError, onShutdown, readConfig, wholeOption, type CommonOptions } from '../context.js'
import { applyGatewayV8Settings, noteMissingNodeFlags } from '../node-flags.js'
import { LOG_LEVELS, type LogFormat, type LogLevel } from '../../ops/log.js'
import type { Config } from '../../config-schema.js'

interface ServeOptions extends CommonOptions {
  logLevel?: string
  logFormat: string
  workers?: string
}

/** The most workers `--workers` takes. */
const MAX_WORKERS = 64

/**
 * `svc serve`: the gateway (API, portal, settler) from a config file, in `--workers` processes sharing the port (one
 * primary forks them: README, `svc serve`). Its stdout is log lines only, JSON by default (one access line a
 * request, events with their context); the line saying where it listens is one of them.
 */
export function serveCommand(program: Command): void {
  common(program.command('serve'))
    .description('run the gateway from a config file')
    .option('--log-level <level>', `${LOG_LEVELS.join(', ')} (default: $SVC_LOG_LEVEL, else info)`)
    .option('--log-format <format>', 'json or pretty', 'json')
    .option(
      '--workers <n>',
      `processes serving the port, 1 to ${MAX_WORKERS} (default: $SVC_WORKERS, else the machine's cores: ${availableParallelism()})`,
    )
    .action(
      action(async (opts: ServeOptions) => {
        const level = (opts.logLevel ?? process.env.SVC_LOG_LEVEL ?? 'info') as LogLevel
        if (!LOG_LEVELS.includes(level))
          throw new CliError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${level}`)
        if (opts.logFormat !== 'json' && opts.logFormat !== 'pretty') {
          throw new CliError(`--log-format must be json or pretty, got ${opts.logFormat}`)
        }
        const workers = workerCount(opts.workers ?? process.env.SVC_WORKERS)
        if (cluster.isPrimary) noteMissingNodeFlags()
        applyGatewayV8Settings()
        const config = await readConfig(opts)
        const { createLogger } = await import('../../ops/log.js')
        const { WorkerLink } = await import('../../ops/workers/worker-link.js')
        const worker = WorkerLink.ofThisProcess()
        const base = worker ? { worker: worker.index } : {}
        const logger = await createLogger({ level, format: opts.logFormat as LogFormat, base })
        if (workers > 1 && !worker) return servePrimary(config, workers, logger)
        const { startServer } = await import('../../server.js')
        const server = await startServer(config, {
          logger,
          ...(worker ? { worker, receiptKey: await workerKey(config) } : {}),
        })
        onShutdown(async () => {
          logger.info('stopping')
          await server.close()
          logger.info('stopped')
          await flushed(logger)
        })
        if (worker) {
          logger.info({ base_url: server.url, pid: process.pid }, `worker ${worker.index} listening`)
          worker.listening(server.url)
          return
        }
        const ready = { base_url: server.url, portal_url: `${server.url}/portal`, pid: process.pid }
        // Printed whatever the level: it is how a supervisor (and `--json` users) learn where the gateway listens.
        logger.child({}, { level: 'info' }).info({ ...ready, metrics_url: server.metricsUrl ?? null }, 'listening')
        logger.flush()
      }),
    )
}

function workerCount(text: string | undefined): number {
  if (text === undefined) return availableParallelism()
  const n = wholeOption('--workers', text, MAX_WORKERS)
  if (n < 1) throw new CliError(`--workers must be at least 1, got ${text}`)
  return n
}

/**
 * The primary of `--workers N`: the store migrated once before any worker opens it, a receipt key made for the whole
 * server when none is configured (receipts then verify whichever worker signed them), the workers started, and the
 * one `/metrics` and `listening` line of the server.
 */
async function servePrimary(config: Config, count: number, logger: import('pino').Logger): Promise<void> {
  const [
    { openStore },
    { loadReceiptKey },
    { generatePrivateKey },
    { WorkerPool },
    { tuningOf },
    { WORKER_RECEIPT_KEY_ENV },
  ] = await Promise.all([
    import('../../store/open.js'),
    import('../../receipts/key.js'),
    import('viem/accounts'),
    import('../../ops/workers/primary.js'),
    import('../../config.js'),
    import('../../ops/workers/messages.js'),
  ])
  await (await openStore(config.store)).close()
  const env: Record<string, string> = {}
  if (loadReceiptKey(config).ephemeral) env[WORKER_RECEIPT_KEY_ENV] = generatePrivateKey()
  // A worker stops within its grace and its requests' settling; the primary kills one that takes longer.
  const stopMs = tuningOf(config).shutdownGraceMs + 15_000
  const pool = new WorkerPool({ count, env, logger, stopMs })
  let metrics: { url: string; close(): Promise<void> } | undefined
  onShutdown(async () => {
    logger.info('stopping')
    await pool.close()
    await metrics?.close()
    logger.info('stopped')
    await flushed(logger)
  })
  const url = await pool.start().catch((err: Error) => {
    throw new CliError(`the gateway did not start: ${err.message}`)
  })
  if (config.metrics !== false) {
    const [{ AggregatorRegistry }, { serveMetrics }] = await Promise.all([
      import('prom-client'),
      import('../../ops/metrics-server.js'),
    ])
    const all = new AggregatorRegistry()
    metrics = await serveMetrics(
      { metrics: () => all.clusterMetrics(), contentType: all.contentType },
      config.metrics ?? {},
      (err) => logger.warn(`metrics not served: ${err.message}; the gateway serves on`),
    )
  }
  const ready = { base_url: url, portal_url: `${url}/portal`, pid: process.pid, workers: pool.pids() }
  logger.child({}, { level: 'info' }).info({ ...ready, metrics_url: metrics?.url ?? null }, 'listening')
  logger.flush()
}

/** A worker's receipt key when the primary made one for the server; otherwise the config's, loaded by the server. */
async function workerKey(config: Config): Promise<import('../../receipts/key.js').ReceiptKey | undefined> {
  const { WORKER_RECEIPT_KEY_ENV } = await import('../../ops/workers/messages.js')
  const made = process.env[WORKER_RECEIPT_KEY_ENV]
  if (!made) return undefined
  delete process.env[WORKER_RECEIPT_KEY_ENV]
  const { loadReceiptKey, DEFAULT_RECEIPT_KEY_ENV } = await import('../../receipts/key.js')
  const key = loadReceiptKey(config, { [DEFAULT_RECEIPT_KEY_ENV]: made })
  return { ...key, ephemeral: true, source: 'a key made for this server' }
}

/** Resolves once the log lines written so far are out (the process exits next). */
function flushed(logger: import('pino').Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()))
}
