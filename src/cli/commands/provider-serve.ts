import { readFileSync } from 'node:fs'
import type { Command } from 'commander'
import { privateKeyToAccount } from 'viem/accounts'
import { OperationError } from '../../accounts/operations.js'
import { JoinRefused, joinMarketplace } from '../../engine/join.js'
import { action, emit, onShutdown, portOption, wholeOption, type CommonOptions } from '../context.js'

interface ServeOptions extends CommonOptions {
  modelFile?: string
  upstream?: string
  name?: string
  host: string
  port: string
  publicUrl?: string
  marketplace: string
  walletKeyFile: string
  offer: string
  inputPrice: string
  outputPrice: string
  sequences: string
  maxConcurrency?: string
}

/** After withdrawing, the engine serves on until no request came for this long... */
const DRAIN_QUIET_MS = 2000
/** ...or this long at most. */
const DRAIN_MAX_MS = 15_000

/** The provider wallet's key: a file holding one 0x-prefixed private key. */
function walletKey(file: string) {
  let text: string
  try {
    text = readFileSync(file, 'utf8').trim()
  } catch (err) {
    throw new OperationError(`--wallet-key-file ${file} cannot be read (${(err as NodeJS.ErrnoException).code})`)
  }
  if (!/^0x[0-9a-fA-F]{64}$/.test(text)) throw new OperationError(`${file} must hold one 0x-prefixed private key`)
  return privateKeyToAccount(text as `0x${string}`)
}

/**
 * `svc provider serve`: a provider node in one command. It serves a GGUF model with node-llama-cpp (or fronts an
 * engine already running), joins a marketplace with the provider's wallet, and withdraws on SIGTERM.
 */
export function providerServeCommand(provider: Command): void {
  provider
    .command('serve')
    .description(
      'serve a GGUF model (or an engine already running) and offer it on a marketplace; SIGTERM withdraws it',
    )
    .option('--model-file <file>', 'a GGUF model to serve with node-llama-cpp')
    .option('--upstream <url>', 'an OpenAI-compatible engine already running, ending in /v1 (instead of --model-file)')
    .option('--name <name>', "the model's name at the engine (default: the file's name)")
    .option('--host <host>', 'interface the engine listens on', '127.0.0.1')
    .option('--port <n>', 'its port (0 picks a free one)', '0')
    .option(
      '--public-url <url>',
      'the URL the marketplace reaches the engine at, ending in /v1 (default: where it listens)',
    )
    .requiredOption('--marketplace <url>', "the marketplace's base URL")
    .requiredOption('--wallet-key-file <file>', "a file holding the provider wallet's private key")
    .requiredOption('--offer <model>', 'the marketplace model it serves (svc/…@…)')
    .requiredOption('--input-price <usdc>', 'USDC per million input tokens')
    .requiredOption('--output-price <usdc>', 'USDC per million output tokens')
    .option('--sequences <n>', 'requests generated at once', '2')
    .option('--max-concurrency <n>', 'requests at once the offer takes (default: --sequences)')
    .option('--json', 'print one JSON object')
    .action(
      action(async (o: ServeOptions) => {
        if (!o.modelFile === !o.upstream) throw new OperationError('give one of --model-file and --upstream')
        const account = walletKey(o.walletKeyFile)
        const sequences = wholeOption('--sequences', o.sequences, 64) || 1
        const port = portOption('--port', o.port)
        let engine:
          | { url: string; name: string; drain(quietMs: number, maxMs: number): Promise<void>; close(): Promise<void> }
          | undefined
        if (o.modelFile) {
          const { EngineServer } = await import('../../engine/chat-server.js')
          const { EngineMissing } = await import('../../engine/node-llama.js')
          engine = await EngineServer.start({
            modelFile: o.modelFile,
            ...(o.name ? { name: o.name } : {}),
            host: o.host,
            port,
            sequences,
          }).catch((err: unknown) => {
            if (err instanceof EngineMissing) throw new OperationError(err.message)
            throw new OperationError(`cannot serve ${o.modelFile}: ${(err as Error).message}`)
          })
        }
        const baseUrl = o.publicUrl ?? engine?.url ?? o.upstream!
        const upstreamModel = o.name ?? engine?.name ?? o.offer
        let membership
        try {
          membership = await joinMarketplace({
            marketplace: o.marketplace,
            account,
            baseUrl,
            bundle: engine ? 'node-llama-cpp' : 'engine',
            profile: 'svc-provider-serve',
            offers: [
              {
                model: o.offer,
                upstreamModel,
                inputPrice: o.inputPrice,
                outputPrice: o.outputPrice,
                maxConcurrency: o.maxConcurrency ? wholeOption('--max-concurrency', o.maxConcurrency, 4096) : sequences,
              },
            ],
          })
        } catch (err) {
          await engine?.close()
          if (err instanceof JoinRefused || err instanceof TypeError)
            throw new OperationError(
              `${(err as Error).message}${err instanceof TypeError ? ` (${o.marketplace})` : ''}`,
            )
          throw err
        }
        // In front of another engine nothing else keeps the process up: it stays until told to leave.
        const staying = setInterval(() => {}, 1 << 30)
        onShutdown(async () => {
          clearInterval(staying)
          await membership.leave()
          // Requests the marketplace routed before it heard finish here; then nothing new comes.
          await engine?.drain(DRAIN_QUIET_MS, DRAIN_MAX_MS)
          await engine?.close()
        })
        emit(
          o,
          { endpoint_id: membership.endpointId, base_url: baseUrl, model: o.offer, upstream_model: upstreamModel },
          `serving ${o.offer} (${upstreamModel}) at ${baseUrl} on ${o.marketplace} as ${membership.endpointId}; SIGTERM withdraws it`,
        )
      }),
    )
}
