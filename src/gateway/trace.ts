import type { Finished } from './charge.js'
import { routingStatus } from './charge.js'
import { splitFee } from '../money/usdc.js'
import type { RequestTrace } from '../ops/trace.js'

export { newTrace, upstreamUntilFirstEvent, type RequestTrace } from '../ops/trace.js'

/** What a finished request tells its trace: who served it, its tokens and charge, or how it failed. */
export function traceFinished(trace: RequestTrace, f: Finished, feeBps: number): void {
  switch (f.kind) {
    case 'delivered': {
      const managed = f.reply.offer.managed
      Object.assign(trace, {
        outcome: 'completed',
        provider: f.reply.offer.provider,
        routing: routingStatus(f),
        completionTokens: f.usage.completion_tokens,
        cost: f.cost,
        fee: managed ? 0n : splitFee(f.cost, feeBps).fee,
      })
      return
    }
    case 'refused':
      trace.outcome = f.error.code
      return
    case 'broken':
      // Nothing is charged for a reply its upstream broke: the line says who broke it.
      Object.assign(trace, { outcome: f.code, provider: f.provider, completionTokens: 0, cost: 0n, fee: 0n })
      return
    case 'closed':
      trace.outcome = 'client_closed'
      if (f.paid) Object.assign(trace, f.paid)
  }
}
