import { execFile } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { Config } from '../../config-schema.js'
import { ENGINE_ENTRY, ENGINES_DIR } from '../../engine/node-llama.js'

/** The demo's real model: a GGUF model the project makes itself, served by node-llama-cpp on this machine. */
export const REAL_MODEL_ID = 'svc/bigram@1'
/** anvil's sixth well-known account: the real model's provider. */
export const REAL_PROVIDER = '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc'

const SCRIPT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'scripts', 'make-model.mjs')

export type RealModel =
  | {
      added: true
      url: string
      model: Config['models'][number]
      provider: Config['providers'][number]
      close(): Promise<void>
    }
  | { added: false; why: string }

/**
 * Makes the model once (into `data/models/`, from the Qwen2 vocabulary in node-llama-cpp's bundled llama.cpp source)
 * and serves it, when node-llama-cpp is installed in engines/; otherwise says how to add it.
 */
export async function startRealModel(data: string): Promise<RealModel> {
  if (!existsSync(ENGINE_ENTRY) || !existsSync(SCRIPT))
    return {
      added: false,
      why: `add a real model served on this machine: (cd ${ENGINES_DIR} && npm ci), then start again`,
    }
  const file = join(data, 'models', 'bigram-q4_0.gguf')
  try {
    if (!existsSync(file)) {
      mkdirSync(dirname(file), { recursive: true })
      await promisify(execFile)(process.execPath, [SCRIPT, '--out', file, '--engines', ENGINES_DIR])
    }
    const { EngineServer } = await import('../../engine/chat-server.js')
    const engine = await EngineServer.start({ modelFile: file, name: 'bigram' })
    return {
      added: true,
      url: engine.url,
      model: {
        id: REAL_MODEL_ID,
        owned_by: 'svc-local',
        contextLimit: 4096,
        capabilities: {
          workload: 'chat',
          tools: false,
          structuredOutputs: false,
          reasoning: false,
          streaming: true,
          maxOutputTokens: 256,
        },
        // Metered in its own tokens: the model file's vocabulary.
        tokenizer: file,
      },
      provider: {
        address: REAL_PROVIDER,
        baseUrl: engine.url,
        bundle: 'node-llama-cpp-3.21.1',
        profile: 'cpu-q4_0',
        offers: [
          {
            model: REAL_MODEL_ID,
            upstreamModel: 'bigram',
            input_price_per_mtok: '20000',
            output_price_per_mtok: '40000',
            maxConcurrency: 4,
          },
        ],
      },
      close: () => engine.close(),
    }
  } catch (err) {
    return { added: false, why: `the real model could not be served (${(err as Error).message.split('\n')[0]})` }
  }
}
