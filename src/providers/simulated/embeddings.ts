import { createHash } from 'node:crypto'

/** How many numbers a simulated embedding model's vectors hold, unless a request asks for fewer. */
export const SIM_DIMENSIONS = 16

/**
 * A deterministic embedding of one input: unit-length, from a hash of the model and the text, so that the same input
 * always has the same vector and different ones differ. Asked for fewer `dimensions`, the first ones, normalized again
 * (as Matryoshka models are shortened).
 */
export function simulatedEmbedding(model: string, input: string | number[], dimensions = SIM_DIMENSIONS): number[] {
  const text = typeof input === 'string' ? input : input.join(' ')
  const out: number[] = []
  for (let block = 0; out.length < dimensions; block++) {
    const h = createHash('sha256').update(`${model}\0${block}\0${text}`).digest()
    for (let i = 0; i + 2 <= h.length && out.length < dimensions; i += 2) out.push(h.readUInt16BE(i) / 32767.5 - 1)
  }
  const norm = Math.sqrt(out.reduce((s, v) => s + v * v, 0)) || 1
  return out.map((v) => v / norm)
}

/** Inputs of an embeddings body as the simulator reads them: a string, strings, a token array or token arrays. */
export function inputsOf(input: unknown): (string | number[])[] | null {
  if (typeof input === 'string') return [input]
  if (!Array.isArray(input) || input.length === 0) return null
  if (input.every((x) => typeof x === 'number')) return [input as number[]]
  if (input.every((x) => typeof x === 'string' || Array.isArray(x))) return input as (string | number[])[]
  return null
}

/** The simulator's reply to an embeddings body (usage counted in words), or why it refuses it. */
export function embeddingsReply(body: Record<string, unknown>): object | string {
  const inputs = inputsOf(body.input)
  if (!inputs) return 'input must be a string, strings or token arrays'
  const model = String(body.model)
  const dimensions = typeof body.dimensions === 'number' ? body.dimensions : undefined
  const words = inputs.reduce(
    (n, x) => n + (typeof x === 'string' ? x.split(/\s+/).filter(Boolean).length : x.length),
    0,
  )
  return {
    object: 'list',
    data: inputs.map((x, index) => ({
      object: 'embedding',
      index,
      embedding: simulatedEmbedding(model, x, dimensions),
    })),
    model,
    usage: { prompt_tokens: words, total_tokens: words },
  }
}
