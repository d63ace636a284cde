import type { AuditReply, AuditSend } from '../audit/auditor.js'
import type { Caller } from '../auth/caller.js'
import { newRequestId } from '../ids/request-id.js'
import { Cancel } from '../providers/cancel.js'
import type { Delivered } from './charge.js'
import type { ChatPipeline } from './pipeline.js'
import type { Produced } from '../routing/attempt.js'
import { newTrace } from './trace.js'
import { countOutput } from '../metering/tokens.js'

/**
 * Audit requests through the pipeline, as the audit account's: admitted against its balance, served by the offer the
 * body pins (`provider.only`, whatever its verification state), charged and paid like any request.
 */
export function auditSender(pipeline: () => ChatPipeline, caller: Caller): AuditSend {
  return async (_offer, body) => {
    const requestId = newRequestId()
    const result = await pipeline().chat({
      body,
      caller,
      requestId,
      cancel: new Cancel(),
      gone: () => false,
      trace: newTrace(),
      audit: true,
    })
    const answer = result.kind === 'admitted' ? await result.answer : result
    if (answer.kind === 'refused') return { requestId, failed: `${answer.error.code}: ${answer.error.message}` }
    if (answer.kind !== 'serving') return { requestId, failed: answer.kind }
    let reply: Produced | undefined
    let delivered: Delivered | undefined
    for await (const events of answer.events)
      for (const e of events) {
        if (e.type === 'finish') reply = e.reply
        else if (e.type === 'charged') delivered = e.delivered
        else if (e.type === 'failed') return { requestId, failed: `${e.code}: ${e.error.message}` }
      }
    if (!reply || !delivered) return { requestId, failed: 'the reply ended without its charge' }
    // An audit's reply is short: counted whole (not only up to its bound, as a charge is), so that what its provider
    // reports can be compared however the reply ended, in one tokenizer (the model's own, named in its config).
    const counter = reply.offer.counter
    const counted =
      countOutput(reply.reasoning, [], Infinity, counter) + countOutput(reply.content, [], Infinity, counter)
    const out: AuditReply = {
      requestId,
      text: reply.content,
      finish: reply.finish,
      counted,
      ...(reply.logprobs ? { logprobs: reply.logprobs } : {}),
      ...(reply.upstreamUsage && reply.offer.ownTokenizer ? { reported: reply.upstreamUsage.completionTokens } : {}),
    }
    return out
  }
}
