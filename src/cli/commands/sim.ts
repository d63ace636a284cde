import type { Command } from 'commander'
import { OperationError } from '../../accounts/operations.js'
import { FAULT_MODES, faultName, parseFault } from '../../providers/simulated/faults.js'
import { SimulatedProvider, type Fragmentation } from '../../providers/simulated/server.js'
import { action, emit, onShutdown } from '../context.js'

interface SimCliOptions {
  port: string
  host: string
  fault: string
  replyTokens: string
  chunkDelayMs: string
  fragmentation: string
  toolPreface: string
  apiKey?: string
  json?: boolean
}

/** `svc sim-provider`: a simulated OpenAI-compatible upstream with switchable faults. */
export function simCommand(program: Command): void {
  program
    .command('sim-provider')
    .description(`run a simulated OpenAI-compatible upstream; switch faults with POST /_sim/fault {"mode": …} (${FAULT_MODES.join(', ')})`)
    .option('--port <n>', 'port (0 picks a free one)', '0')
    .option('--host <host>', 'interface', '127.0.0.1')
    .option('--fault <mode>', 'initial fault mode', 'none')
    .option('--reply-tokens <n>', 'words in a text reply', '12')
    .option('--chunk-delay-ms <n>', 'pause between streamed chunks', '0')
    .option('--fragmentation <how>', 'tool-call argument deltas: whole, split or bytes', 'split')
    .option('--tool-preface <text>', 'content streamed before tool calls', '')
    .option('--api-key <key>', 'require this bearer key')
    .option('--config <file>', 'accepted for symmetry; unused')
    .option('--json', 'print one JSON object')
    .action(action(async (opts: SimCliOptions) => {
      const fault = parseFault(opts.fault)
      if (!fault) throw new OperationError(`unknown fault mode ${opts.fault}; one of ${FAULT_MODES.join(', ')}`)
      if (!['whole', 'split', 'bytes'].includes(opts.fragmentation)) throw new OperationError('--fragmentation must be whole, split or bytes')
      const sim = await SimulatedProvider.start({
        port: Number(opts.port), host: opts.host, fault, replyTokens: Number(opts.replyTokens), chunkDelayMs: Number(opts.chunkDelayMs),
        fragmentation: opts.fragmentation as Fragmentation, toolPreface: opts.toolPreface, ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
      })
      onShutdown(() => sim.close())
      emit(opts, { base_url: sim.url, port: sim.port, fault: faultName(fault) }, `simulated provider on ${sim.url} (fault: ${faultName(fault)})`)
    }))
}
