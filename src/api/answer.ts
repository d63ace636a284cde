import type { FastifyReply } from 'fastify'
import type { ApiError } from '../protocol/errors.js'
import type { Cancel } from '../providers/cancel.js'
import type { Admitted } from '../gateway/context.js'
import type { Answer, ChatResult, ReplyEvent, ReplyEvents } from '../gateway/reply-events.js'
import { sendError } from './errors.js'
import type { StreamWriter } from './sse-wire.js'

/** How one API encodes a reply: its stream (made once the request is admitted), or its plain body. */
export interface ReplyEncoding {
  stream(r: Admitted): StreamWriter
  /** The body of a delivered plain reply, from its last event. */
  plain(r: Admitted, charged: Extract<ReplyEvent, { type: 'charged' }>): string
}

/**
 * Answers a chat request (chat completions, Responses) as its API encodes it: the same rules for every API. A
 * stream's writer exists from admission (its keep-alive runs while the first offer is tried); a failure before its
 * status line went out is a plain HTTP error, after it an error event. A stream's events are pulled one batch at a
 * time, the next only once the client took the last; a client that leaves ends them (`return`), charged for what
 * reached it.
 */
export async function answerChat(
  reply: FastifyReply,
  cancel: Cancel,
  result: ChatResult,
  encoding: ReplyEncoding,
): Promise<FastifyReply> {
  let writer: StreamWriter | undefined
  let answer: Answer
  if (result.kind === 'admitted') {
    writer = result.request.prepared.stream ? encoding.stream(result.request) : undefined
    answer = await result.answer
  } else answer = result
  switch (answer.kind) {
    case 'refused':
      return refuse(reply, writer, answer.error)
    case 'replay':
      return reply
        .code(answer.status)
        .header('idempotent-replayed', 'true')
        .header('content-type', 'application/json; charset=utf-8')
        .send(answer.body)
    case 'gone':
      writer?.stopKeepAlive()
      reply.hijack()
      reply.raw.destroy()
      return reply
    case 'serving':
      return writer
        ? streamed(reply, writer, answer.events, cancel)
        : plain(reply, answer.request, answer.events, encoding)
  }
}

function refuse(reply: FastifyReply, writer: StreamWriter | undefined, error: ApiError): FastifyReply {
  if (!writer?.headersSent) {
    writer?.stopKeepAlive()
    return sendError(reply, error)
  }
  writer.fail(error.code === 'provider_output_invalid' ? error.code : 'stream_interrupted', error.message)
  return reply
}

async function streamed(
  reply: FastifyReply,
  writer: StreamWriter,
  events: ReplyEvents,
  cancel: Cancel,
): Promise<FastifyReply> {
  const gone = () => reply.raw.destroyed
  for await (const batch of events) {
    writer.events(batch)
    // Leaving the loop ends the events: a client gone pays for what it was sent.
    if (gone()) break
    // A client that reads slowly (or not at all) holds the upstream back, not the gateway's memory.
    if (writer.backlogged) await writer.drained(cancel)
    if (gone()) break
  }
  writer.end()
  return reply
}

async function plain(
  reply: FastifyReply,
  r: Admitted,
  events: ReplyEvents,
  encoding: ReplyEncoding,
): Promise<FastifyReply> {
  let last: ReplyEvent | undefined
  for await (const batch of events) last = batch.at(-1)
  if (last?.type === 'charged') {
    const text = encoding.plain(r, last)
    // Kept before it is sent: a retry under the same idempotency key after a crash gets this reply again.
    await last.remember?.(text)
    return reply.header('content-type', 'application/json; charset=utf-8').send(text)
  }
  if (last?.type === 'failed') return sendError(reply, last.error)
  // Its client left.
  reply.hijack()
  reply.raw.destroy()
  return reply
}
