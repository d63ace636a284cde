import { StringDecoder } from 'node:string_decoder'
import { Pool } from 'undici'
import type { Dispatcher } from 'undici'
import { Cancel } from './cancel.js'
import { plainExchange, ReplyTooLarge, type PlainReply } from './plain-exchange.js'
import { ChunkStream } from './chunk-stream.js'
import { replyEvents } from './openai-chunks.js'
import type { Failure, Provider, UpstreamEvent, UpstreamRequest } from './types.js'

export interface UpstreamTimeouts {
  /** Until the first event of a stream; past it the attempt fails over. */
  firstByteTimeoutMs: number
  /** Until a plain (non-stream) reply has arrived whole: the upstream sends nothing before it is done. */
  replyTimeoutMs: number
  /** Longest silence between two body chunks once the reply started. */
  idleTimeoutMs: number
}

const MAX_ERROR_BODY = 2048
/** What a plain reply, or one event of a stream, may weigh: far above any completion, a bound on a broken upstream. */
const MAX_REPLY_BYTES = 16 * 1024 * 1024

function failure(kind: Failure['kind'], detail: string, status?: number): UpstreamEvent {
  return { type: 'failure', failure: status === undefined ? { kind, detail } : { kind, detail, status } }
}

/** An OpenAI-compatible upstream reached over a keep-alive undici Pool. */
export class OpenAICompatibleProvider implements Provider {
  private readonly pool: Pool
  private readonly path: string
  private readonly headers: Record<string, string>

  constructor(baseUrl: string, apiKey: string | undefined, private readonly timeouts: UpstreamTimeouts, connections = 256) {
    const url = new URL(baseUrl)
    this.pool = new Pool(url.origin, { connections, pipelining: 1, keepAliveTimeout: 10_000 })
    this.path = `${url.pathname.replace(/\/$/, '')}/chat/completions`
    this.headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
    if (apiKey) this.headers.authorization = `Bearer ${apiKey}`
  }

  async *stream(upstreamModel: string, request: UpstreamRequest, client: Cancel): AsyncIterable<UpstreamEvent[]> {
    // This attempt's own cancellation: the client's going away, or its time budget spent.
    const attempt = new Cancel()
    const onAbort = () => attempt.abort()
    client.once('abort', onAbort)
    if (client.aborted) attempt.abort()
    let timedOut = false
    const budgetMs = request.stream ? this.timeouts.firstByteTimeoutMs : this.timeouts.replyTimeoutMs
    let timer: NodeJS.Timeout | undefined = setTimeout(() => {
      timedOut = true
      attempt.abort()
    }, budgetMs)
    const clearTimer = () => {
      if (timer) clearTimeout(timer)
      timer = undefined
    }
    const why = (err: unknown): UpstreamEvent => {
      if (client.aborted) return failure('aborted', 'the client went away')
      if (timedOut) return failure('unavailable', request.stream ? `no first event within ${budgetMs} ms` : `no reply within ${budgetMs} ms`)
      const e = err as { code?: string; message?: string }
      return failure('unavailable', `upstream connection failed: ${e.code ?? e.message ?? String(err)}`)
    }
    if (!request.stream) {
      let events: UpstreamEvent[]
      try {
        const body = requestBody(upstreamModel, request)
        // The reply is bounded as a whole by the timer above.
        const reply = await plainExchange(this.pool, { path: this.path, headers: this.headers, body, headersTimeout: budgetMs + 1000, bodyTimeout: budgetMs + 1000 }, attempt, { errorBytes: MAX_ERROR_BODY, replyBytes: MAX_REPLY_BYTES })
        events = plainEvents(reply)
      } catch (err) {
        events = [err instanceof ReplyTooLarge ? failure('invalid_output', err.message) : why(err)]
      } finally {
        clearTimer()
        client.removeListener('abort', onAbort)
      }
      yield events
      return
    }
    let res: Dispatcher.ResponseData
    try {
      res = await this.pool.request({
        path: this.path,
        method: 'POST',
        headers: this.headers,
        body: requestBody(upstreamModel, request),
        signal: attempt,
        headersTimeout: budgetMs + 1000,
        // Bounded between its chunks.
        bodyTimeout: this.timeouts.idleTimeoutMs,
      })
    } catch (err) {
      clearTimer()
      client.removeListener('abort', onAbort)
      yield [why(err)]
      return
    }
    try {
      if (res.statusCode !== 200) {
        clearTimer()
        yield plainEvents({ status: res.statusCode, text: await readBounded(res.body) })
        return
      }
      const type = String(res.headers['content-type'] ?? '')
      // An upstream may answer a stream request with a plain reply.
      if (!type.includes('text/event-stream')) {
        let text: string
        try {
          text = await res.body.text()
        } catch (err) {
          yield [why(err)]
          return
        }
        clearTimer()
        yield plainEvents({ status: 200, text })
        return
      }
      yield* this.readStream(res, clearTimer, why)
    } finally {
      clearTimer()
      client.removeListener('abort', onAbort)
      if (!res.body.destroyed) res.body.destroy()
    }
  }

  private async *readStream(res: Dispatcher.ResponseData, firstByte: () => void, why: (err: unknown) => UpstreamEvent): AsyncIterable<UpstreamEvent[]> {
    const reader = new ChunkStream()
    // A finish reason or [DONE]: the upstream closing the stream after either is its end, not a break.
    let finished = false
    try {
      for await (const bytes of res.body as AsyncIterable<Buffer>) {
        const events: UpstreamEvent[] = []
        reader.push(bytes, events)
        if (reader.buffered > MAX_REPLY_BYTES && events[events.length - 1]?.type !== 'failure') {
          events.push(failure('invalid_output', `stream event larger than ${MAX_REPLY_BYTES / 1024 / 1024} MiB`))
        }
        if (events.length === 0) continue
        if (!finished) finished = events.some((e) => e.type === 'finish')
        firstByte()
        yield events
        if (events[events.length - 1]!.type === 'failure') return
      }
    } catch (err) {
      yield [why(err)]
      return
    }
    reader.end()
    if (!reader.done && !finished) yield [failure('unavailable', 'upstream closed the stream before it finished')]
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}

/** Splices model and stream flags into the pre-serialized body, so the request is stringified once per request. */
export function requestBody(upstreamModel: string, request: UpstreamRequest): string {
  const head = `{"model":${JSON.stringify(upstreamModel)},"stream":${request.stream}${request.stream ? ',"stream_options":{"include_usage":true}' : ''}`
  return request.bodyJson === '{}' ? `${head}}` : `${head},${request.bodyJson.slice(1)}`
}

/** The events of a whole reply (a plain one, or a refusal): its content, or why it cannot be used. */
function plainEvents(reply: PlainReply): UpstreamEvent[] {
  if (reply.status !== 200) return [failure('unavailable', `upstream answered ${reply.status}: ${errorSummary(reply.text)}`, reply.status)]
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
  return text.slice(0, 200).replace(/\s+/g, ' ')
}

/** The start of a refusal's body: reading stops past MAX_ERROR_BODY characters. */
async function readBounded(body: Dispatcher.ResponseData['body']): Promise<string> {
  // undici's body ignores setEncoding: it yields bytes, and a character may be cut between two reads.
  const utf8 = new StringDecoder('utf8')
  let text = ''
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      text += utf8.write(chunk)
      if (text.length > MAX_ERROR_BODY) break
    }
  } catch {
    // The status already says what matters.
  }
  return text
}
