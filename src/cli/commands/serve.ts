import type { Command } from 'commander'
import { action, common, CliError, onShutdown, readConfig, type CommonOptions } from '../context.js'
import { noteMissingNodeFlags } from '../node-flags.js'
import { LOG_LEVELS, type LogFormat, type LogLevel } from '../../ops/log.js'

interface ServeOptions extends CommonOptions {
  logLevel?: string
  logFormat: string
}

/**
 * `svc serve`: the gateway (API, portal, settler) from a config file. Its stdout is log lines only, JSON by default
 * (one access line a request, events with their context); the line saying where it listens is one of them.
 */
export function serveCommand(program: Command): void {
  common(program.command('serve'))
    .description('run the gateway from a config file')
    .option('--log-level <level>', `${LOG_LEVELS.join(', ')} (default: $SVC_LOG_LEVEL, else info)`)
    .option('--log-format <format>', 'json or pretty', 'json')
    .action(
      action(async (opts: ServeOptions) => {
        const level = (opts.logLevel ?? process.env.SVC_LOG_LEVEL ?? 'info') as LogLevel
        if (!LOG_LEVELS.includes(level))
          throw new CliError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${level}`)
        if (opts.logFormat !== 'json' && opts.logFormat !== 'pretty') {
          throw new CliError(`--log-format must be json or pretty, got ${opts.logFormat}`)
        }
        noteMissingNodeFlags()
        const config = await readConfig(opts)
        const { createLogger } = await import('../../ops/log.js')
        const logger = await createLogger({ level, format: opts.logFormat as LogFormat })
        const { startServer } = await import('../../server.js')
        const server = await startServer(config, { logger })
        onShutdown(async () => {
          logger.info('stopping')
          await server.close()
          logger.info('stopped')
          logger.flush()
        })
        const ready = { base_url: server.url, portal_url: `${server.url}/portal`, pid: process.pid }
        // Printed whatever the level: it is how a supervisor (and `--json` users) learn where the gateway listens.
        logger.child({}, { level: 'info' }).info({ ...ready, metrics_url: server.metricsUrl ?? null }, 'listening')
        logger.flush()
      }),
    )
}
