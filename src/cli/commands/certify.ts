import type { Command } from 'commander'
import { OperationError } from '../../accounts/operations.js'
import { action, noConfig, emit, type CommonOptions } from '../context.js'

interface CertifyCliOptions extends CommonOptions {
  baseUrl: string
  model: string
  apiKey?: string
  maxArgumentBytes: string
  maxConcurrency: string
  agentTurns: string
  repeats: string
  timeoutMs: string
}

function positive(name: string, text: string): number {
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1) throw new OperationError(`${name} must be a positive integer, got ${text}`)
  return n
}

/** `svc certify`: the probe suite against an OpenAI-compatible upstream, printing the tool_contract it earned. */
export function certifyCommand(program: Command): void {
  noConfig(program.command('certify'))
    .description('probe an OpenAI-compatible upstream for tool calling and print the tool_contract it earned')
    .requiredOption('--base-url <url>', 'the upstream, ending in /v1')
    .requiredOption('--model <name>', 'the model name the upstream knows')
    .option('--api-key <key>', 'bearer key for the upstream')
    .option('--max-argument-bytes <n>', 'largest argument document to try (sizes grow ×4 from 1024)', '65536')
    .option('--max-concurrency <n>', 'most concurrent tool calls to try (levels double from 1)', '32')
    .option('--agent-turns <n>', 'turns of the agent loop probe', '3')
    .option(
      '--repeats <n>',
      'times each tool_choice mode is asked (other messages, pinned sampling); all must obey',
      '3',
    )
    .option('--timeout-ms <n>', 'per request: wait for the first byte, and the longest pause after it', '60000')
    .action(
      action(async (opts: CertifyCliOptions) => {
        let url: URL
        try {
          url = new URL(opts.baseUrl)
        } catch {
          throw new OperationError(`--base-url must be a URL, got ${opts.baseUrl}`)
        }
        const { certify, CertifyError } = await import('../../tools/certify.js')
        let result
        try {
          result = await certify({
            baseUrl: url.href.replace(/\/$/, ''),
            model: opts.model,
            ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
            maxArgumentBytes: positive('--max-argument-bytes', opts.maxArgumentBytes),
            maxConcurrency: positive('--max-concurrency', opts.maxConcurrency),
            agentTurns: positive('--agent-turns', opts.agentTurns),
            repeats: positive('--repeats', opts.repeats),
            timeoutMs: positive('--timeout-ms', opts.timeoutMs),
          })
        } catch (err) {
          if (err instanceof CertifyError) throw new OperationError(err.message)
          throw err
        }
        const width = Math.max(...result.probes.map((p) => p.name.length))
        emit(opts, { ...result }, [
          `certification of model ${JSON.stringify(result.model)} at ${result.base_url}`,
          '',
          ...result.probes.map((p) => `  ${p.passed ? 'pass' : 'FAIL'}  ${p.name.padEnd(width)}  ${p.detail}`),
          '',
          result.tool_contract
            ? `earned tool_contract (paste it into the model's config):\n${JSON.stringify(result.tool_contract, null, 2)}`
            : 'earned no tool_contract: the upstream cannot make a valid tool call with tool_choice auto, so capabilities.tools must stay false',
        ])
      }),
    )
}
