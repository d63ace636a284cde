import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { ENGINE_ENTRY, ENGINES_DIR } from '../../src/engine/node-llama.js'
import type { Config } from '../../src/config-schema.js'
import { startMarket } from './market.js'

/** node-llama-cpp is installed in engines/ (`npm ci` there): the real-engine tests skip without it. */
export const ENGINE_INSTALLED = existsSync(ENGINE_ENTRY)

/** Long enough (57 tokens of Qwen2's vocabulary, each another) for a client to leave while it is generated. */
export const SENTENCE =
  'Alpha bravo charlie delta echo golf hotel india kilo lima mike oscar papa sierra tango victor one two three four ' +
  'five six seven eight nine ten red green blue black white brown pink gray gold silver river stone bridge north ' +
  'south east west cat dog bird fish.'
export const SENTENCE_TOKENS = 57

/** A model scripts/make-model.mjs makes with `args`, made once into engines/.cache as `name`. */
function madeModel(name: string, args: string[]): string {
  const dir = join(ENGINES_DIR, '.cache', 'models')
  const file = join(dir, name)
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true })
    execFileSync(process.execPath, ['scripts/make-model.mjs', '--out', file, ...args])
  }
  return file
}

/** The model that answers every turn with SENTENCE. */
export const modelFile = () => madeModel('bigram-57-q4_0.gguf', ['--sentence', SENTENCE])

/** Another model of the same vocabulary, which a provider could pass off as modelFile's: it says something else. */
export const substituteModelFile = () =>
  madeModel('bigram-substitute-q4_0.gguf', ['--sentence', 'Zulu yankee xray whiskey uniform quebec nine eight seven.'])

/** What the reasoning model thinks, between <think> and </think>, before it answers with DEFAULT_SENTENCE. */
export const THOUGHT = 'Let me think about rivers'
export const DEFAULT_SENTENCE = 'The river runs north past the stone bridge.'

/** A reasoning model (scripts/make-model.mjs --think): THOUGHT, then DEFAULT_SENTENCE. */
export const thinkingModelFile = () => madeModel('bigram-think-q4_0.gguf', ['--think', THOUGHT])

/**
 * A test market whose svc/atlas@1 is served by the engine at `baseUrl` (as `upstreamModel`) from its first `providers`
 * providers (the others stay simulated), metered in the tokenizer of `model` (metering version 2).
 */
export function engineMarket(o: {
  baseUrl: string
  upstreamModel: string
  model: string
  providers: 1 | 2
  edit?: (config: Config) => void
}) {
  return startMarket({
    tuning: { firstByteTimeoutMs: 10_000, replyTimeoutMs: 10_000 },
    edit: (config) => {
      const atlas = config.models.find((x) => x.id === 'svc/atlas@1')!
      atlas.tokenizer = o.model
      atlas.tool_contract = { ...atlas.tool_contract!, metering_version: 2 }
      for (const p of config.providers.slice(0, o.providers)) {
        p.baseUrl = o.baseUrl
        for (const offer of p.offers) offer.upstreamModel = o.upstreamModel
      }
      o.edit?.(config)
    },
  })
}
