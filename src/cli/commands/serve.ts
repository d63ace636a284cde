import type { Command } from 'commander'
import { action, common, emit, onShutdown, readConfig, type CommonOptions } from '../context.js'
import { noteMissingNodeFlags } from '../node-flags.js'

/** `svc serve`: the gateway (API, portal, settler) from a config file. */
export function serveCommand(program: Command): void {
  common(program.command('serve'))
    .description('run the gateway from a config file')
    .action(
      action(async (opts: CommonOptions) => {
        noteMissingNodeFlags()
        const config = await readConfig(opts)
        const { startServer } = await import('../../server.js')
        const server = await startServer(config)
        onShutdown(() => server.close())
        emit(
          opts,
          { base_url: server.url, portal_url: `${server.url}/portal`, pid: process.pid },
          `svc gateway listening on ${server.url} (portal ${server.url}/portal)`,
        )
      }),
    )
}
