// Tool calls cut into OpenAI's stream deltas, as the simulated upstream's `openai` dialect writes them.
import type { SimReply } from './reply.js'

export type Fragmentation = 'whole' | 'split' | 'bytes' | 'unindexed'
export const FRAGMENTATIONS: readonly Fragmentation[] = ['whole', 'split', 'bytes', 'unindexed']

/** Tool-call deltas: id and name first, then the arguments cut per the fragmentation. */
export function toolDeltas(calls: SimReply['toolCalls'], fragmentation: Fragmentation): Record<string, unknown>[] {
  if (fragmentation === 'unindexed') return toolDeltas(calls, 'split').map(({ index: _index, ...rest }) => rest)
  const perCall = calls.map((c, index) => {
    const head = {
      index,
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: fragmentation === 'whole' ? c.arguments : '' },
    }
    if (fragmentation === 'whole') return [head]
    const size = fragmentation === 'bytes' ? 1 : 8
    const rest: Record<string, unknown>[] = []
    for (let i = 0; i < c.arguments.length; i += size)
      rest.push({ index, function: { arguments: c.arguments.slice(i, i + size) } })
    return [head, ...rest]
  })
  if (fragmentation !== 'bytes') return perCall.flat()
  const out: Record<string, unknown>[] = []
  for (let i = 0; perCall.some((d) => i < d.length); i++) for (const d of perCall) if (i < d.length) out.push(d[i]!)
  return out
}
