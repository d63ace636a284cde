import { cutAt } from '../protocol/errors.js'
import type { PlainReply } from './plain-exchange.js'
import { replyEvents } from './openai-chunks.js'
import type { Failure, UpstreamEvent, UpstreamRequest } from './types.js'

/** What an OpenAI-compatible upstream is sent, and what its whole replies and refusals become as events. */

export function failure(kind: Failure['kind'], detail: string, status?: number): UpstreamEvent {
  return { type: 'failure', failure: status === undefined ? { kind, detail } : { kind, detail, status } }
}

/**
 * Splices model, stream flags and max_tokens into the pre-serialized body, so the request is stringified once per
 * request.
 */
export function requestBody(upstreamModel: string, request: UpstreamRequest): string {
  const max = request.maxTokens === undefined ? '' : `,"max_tokens":${request.maxTokens}`
  const head = `{"model":${JSON.stringify(upstreamModel)},"stream":${request.stream}${request.stream ? ',"stream_options":{"include_usage":true}' : ''}${max}`
  return request.bodyJson === '{}' ? `${head}}` : `${head},${request.bodyJson.slice(1)}`
}

/** The events of a whole reply (a plain one, or a refusal): its content, or why it cannot be used. */
export function plainEvents(reply: PlainReply): UpstreamEvent[] {
  if (reply.status !== 200)
    return [failure('unavailable', `upstream answered ${reply.status}: ${errorSummary(reply.text)}`, reply.status)]
  let parsed: unknown
  try {
    parsed = JSON.parse(reply.text)
  } catch {
    return [failure('invalid_output', 'reply is not JSON')]
  }
  return replyEvents(parsed)
}

/** The start of an upstream's error body, on one line. */
function errorSummary(text: string): string {
  return cutAt(text, 200).replace(/\s+/g, ' ')
}
