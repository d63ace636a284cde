import type { Cheat, Fault } from './faults.js'
import type { SimReply, TokenLogprob } from './reply.js'

/**
 * The reply a cheating provider sends in place of the honest one (`Cheat`). `substitute` is planned by `replan`, as
 * another model would answer the same request.
 */
export function cheated(honest: SimReply, cheat: Cheat, replan: () => SimReply): SimReply {
  switch (cheat.kind) {
    case 'substitute':
      return replan()
    case 'quantized': {
      if (!honest.logprobs) return honest
      return { ...honest, logprobs: shifted(honest.logprobs, -cheat.milli / 1000) }
    }
    case 'inflate': {
      const sent = honest.reasoning.length + honest.pieces.length
      return { ...honest, reportedExtra: Math.ceil((sent * cheat.percent) / 100) }
    }
    case 'truncate': {
      const keep = Math.max(0, cheat.tokens - honest.reasoning.length)
      if (honest.toolCalls.length > 0 || honest.pieces.length <= keep) return honest
      const cut: SimReply = { ...honest, pieces: honest.pieces.slice(0, keep), finish: 'stop' }
      if (honest.logprobs) cut.logprobs = honest.logprobs.slice(0, keep)
      return cut
    }
  }
}

/** Whether the `n`th request (from 0) under `fault` is cheated on: `sometimes` spreads its share evenly. */
export function cheatOf(fault: Fault, n: number): Cheat | undefined {
  if (fault.kind === 'sometimes')
    return Math.floor(((n + 1) * fault.percent) / 100) > Math.floor((n * fault.percent) / 100) ? fault.cheat : undefined
  if (
    fault.kind === 'substitute' ||
    fault.kind === 'quantized' ||
    fault.kind === 'inflate' ||
    fault.kind === 'truncate'
  )
    return fault
  return undefined
}

/** Honest noise of nondeterministic kernels: each log probability moved by up to ±`milli` thousandths of a nat. */
export function jittered(reply: SimReply, milli: number, random: () => number = Math.random): SimReply {
  if (!reply.logprobs || milli <= 0) return reply
  return {
    ...reply,
    logprobs: reply.logprobs.map((e) => {
      const d = ((random() * 2 - 1) * milli) / 1000
      return { ...shifted([e], d)[0]! }
    }),
  }
}

function shifted(entries: readonly TokenLogprob[], by: number): TokenLogprob[] {
  return entries.map((e) => ({
    ...e,
    logprob: Math.min(0, e.logprob + by),
    top_logprobs: e.top_logprobs.map((t) => ({ ...t, logprob: Math.min(0, t.logprob + by) })),
  }))
}
