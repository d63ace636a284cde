// The serving engines whose wire the simulated upstream speaks (`--dialect`).
import type { Dialect, DialectName } from './dialect.js'
import { llamacpp } from './llamacpp.js'
import { ollama } from './ollama.js'
import { openai } from './openai.js'
import { sglang } from './sglang.js'
import { tgi } from './tgi.js'
import { vllm } from './vllm.js'

export { DIALECT_NAMES, type Dialect, type DialectName, type StreamContext } from './dialect.js'

export const DIALECTS: Readonly<Record<DialectName, Dialect>> = { openai, llamacpp, vllm, sglang, tgi, ollama }
