import type { Command } from 'commander'
import { OperationError } from '../../accounts/operations.js'
import { FAULT_MODES, faultName, parseFault } from '../../providers/simulated/faults.js'
import { SimulatedProvider } from '../../providers/simulated/server.js'
import { FRAGMENTATIONS, type Fragmentation } from '../../providers/simulated/wire.js'
import { DIALECT_NAMES, type DialectName } from '../../providers/simulated/dialects/index.js'
import { behavioursProblem, type Behaviours } from '../../providers/simulated/behaviour.js'
import { action, emit, onShutdown, portOption, wholeOption } from '../context.js'

interface SimCliOptions {
  port: string
  host: string
  fault: string
  replyTokens: string
  chunkDelayMs: string
  fragmentation: string
  toolPreface: string
  dialect: string
  reasoningTokens: string
  models?: string
  apiKey?: string
  json?: boolean
}

/** `svc sim-provider`: a simulated OpenAI-compatible upstream with switchable faults. */
export function simCommand(program: Command): void {
  program
    .command('sim-provider')
    .description(
      `run a simulated OpenAI-compatible upstream; switch faults with POST /_sim/fault {"mode": …} (${FAULT_MODES.join(', ')})`,
    )
    .option('--port <n>', 'port (0 picks a free one)', '0')
    .option('--host <host>', 'interface', '127.0.0.1')
    .option('--fault <mode>', 'initial fault mode', 'none')
    .option('--reply-tokens <n>', 'words in a text reply', '12')
    .option('--chunk-delay-ms <n>', 'pause between streamed chunks', '0')
    .option('--fragmentation <how>', `tool-call argument deltas: ${FRAGMENTATIONS.join(', ')}`, 'split')
    .option('--tool-preface <text>', 'content streamed before tool calls', '')
    .option('--dialect <engine>', `the serving engine whose wire it speaks: ${DIALECT_NAMES.join(', ')}`, 'openai')
    .option('--reasoning-tokens <n>', 'words of reasoning before each reply', '0')
    .option(
      '--models <json>',
      'tool abilities per upstream model, e.g. {"tern":{"parallel":false,"toolChoice":["auto","none"]}}',
    )
    .option('--api-key <key>', 'require this bearer key')
    .option('--config <file>', 'accepted for symmetry; unused')
    .option('--json', 'print one JSON object')
    .action(
      action(async (opts: SimCliOptions) => {
        const fault = parseFault(opts.fault)
        if (!fault) throw new OperationError(`unknown fault mode ${opts.fault}; one of ${FAULT_MODES.join(', ')}`)
        if (!FRAGMENTATIONS.includes(opts.fragmentation as Fragmentation))
          throw new OperationError(`--fragmentation must be one of ${FRAGMENTATIONS.join(', ')}`)
        if (!DIALECT_NAMES.includes(opts.dialect as DialectName))
          throw new OperationError(`--dialect must be one of ${DIALECT_NAMES.join(', ')}`)
        const models = opts.models === undefined ? {} : parseModels(opts.models)
        const port = portOption('--port', opts.port)
        const replyTokens = wholeOption('--reply-tokens', opts.replyTokens, 100_000)
        const chunkDelayMs = wholeOption('--chunk-delay-ms', opts.chunkDelayMs, 60_000)
        const reasoningTokens = wholeOption('--reasoning-tokens', opts.reasoningTokens, 100_000)
        const sim = await SimulatedProvider.start({
          port,
          host: opts.host,
          fault,
          replyTokens,
          chunkDelayMs,
          fragmentation: opts.fragmentation as Fragmentation,
          toolPreface: opts.toolPreface,
          dialect: opts.dialect as DialectName,
          reasoningTokens,
          models,
          ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
        }).catch((err: NodeJS.ErrnoException) => {
          // The interface cannot be listened on: one line, not a stack trace.
          if (
            err.code === 'EADDRINUSE' ||
            err.code === 'EADDRNOTAVAIL' ||
            err.code === 'ENOTFOUND' ||
            err.code === 'EACCES'
          ) {
            throw new OperationError(`cannot listen on ${opts.host}:${port} (${err.code})`)
          }
          throw err
        })
        onShutdown(() => sim.close())
        emit(
          opts,
          { base_url: sim.url, port: sim.port, fault: faultName(fault), dialect: opts.dialect },
          `simulated provider on ${sim.url} (${opts.dialect} dialect, fault: ${faultName(fault)})`,
        )
      }),
    )
}

/** `--models`: a JSON object of behaviours by upstream model, each naming only fields a behaviour has. */
function parseModels(text: string): Behaviours {
  let models: unknown
  try {
    models = JSON.parse(text)
  } catch (err) {
    throw new OperationError(`--models is not JSON: ${(err as Error).message}`)
  }
  const problem = behavioursProblem(models)
  if (problem) throw new OperationError(`--models${problem.startsWith('must') ? ' ' : ': '}${problem}`)
  return models as Behaviours
}
