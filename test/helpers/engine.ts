import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { ENGINE_ENTRY, ENGINES_DIR } from '../../src/engine/node-llama.js'

/** node-llama-cpp is installed in engines/ (`npm ci` there): the real-engine tests skip without it. */
export const ENGINE_INSTALLED = existsSync(ENGINE_ENTRY)

/** Long enough (57 tokens of Qwen2's vocabulary, each another) for a client to leave while it is generated. */
export const SENTENCE =
  'Alpha bravo charlie delta echo golf hotel india kilo lima mike oscar papa sierra tango victor one two three four ' +
  'five six seven eight nine ten red green blue black white brown pink gray gold silver river stone bridge north ' +
  'south east west cat dog bird fish.'
export const SENTENCE_TOKENS = 57

/** The model that answers every turn with SENTENCE (scripts/make-model.mjs), made once into engines/.cache. */
export function modelFile(): string {
  const dir = join(ENGINES_DIR, '.cache', 'models')
  const file = join(dir, 'bigram-57-q4_0.gguf')
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true })
    execFileSync(process.execPath, ['scripts/make-model.mjs', '--out', file, '--sentence', SENTENCE])
  }
  return file
}

/** What the reasoning model thinks, between <think> and </think>, before it answers with DEFAULT_SENTENCE. */
export const THOUGHT = 'Let me think about rivers'
export const DEFAULT_SENTENCE = 'The river runs north past the stone bridge.'

/** A reasoning model (scripts/make-model.mjs --think): THOUGHT, then DEFAULT_SENTENCE. */
export function thinkingModelFile(): string {
  const dir = join(ENGINES_DIR, '.cache', 'models')
  const file = join(dir, 'bigram-think-q4_0.gguf')
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true })
    execFileSync(process.execPath, ['scripts/make-model.mjs', '--out', file, '--think', THOUGHT])
  }
  return file
}
