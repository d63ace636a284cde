import { isUnreached } from './unreached.js'
import { Client, Pool } from 'undici'
import type { Dispatcher } from 'undici'
import { Cancel, untilAborted } from './cancel.js'
import { readBounded, readWhole } from './bodies.js'
import { plainExchange, ReplyTooLarge } from './plain-exchange.js'
import { closedBeforeReply } from './stale-connection.js'
import { ChunkStream } from './chunk-stream.js'
import type { EmbedRequest, Embedded, Provider, UpstreamEvent, UpstreamRequest } from './types.js'
import { embedExchange } from './embeddings-exchange.js'
import { failure, plainEvents, requestBody } from './upstream-wire.js'
import { guardedLookup, literalRefusal, type AddressPolicy } from './address-policy.js'

export interface UpstreamTimeouts {
  /** Until the first event of a stream; past it the attempt fails over. */
  firstByteTimeoutMs: number
  /** Until a plain (non-stream) reply has arrived whole: the upstream sends nothing before it is done. */
  replyTimeoutMs: number
  /** Longest time between two events of a stream once it started (comments and empty deltas do not count). */
  idleTimeoutMs: number
}

const MAX_ERROR_BODY = 2048
/** What a plain reply, or one event of a stream, may weigh: far above any completion, a bound on a broken upstream. */
const MAX_REPLY_BYTES = 16 * 1024 * 1024

/** Around each batch a stream yields: its idle timer does not run out while the consumer holds the batch. */
interface StreamFlow {
  hold(): void
  /** `progressed`: the events added to the reply (content, tool-call arguments), which alone restart the idle timer. */
  resumed(progressed: boolean): void
}

export interface UpstreamOptions {
  /** Connections kept to the upstream at most (256). */
  connections?: number
  /**
   * The addresses it may be reached at (an endpoint a wallet registered): checked on every address connected to, so
   * that a name resolving to a refused one fails the attempt as an unreachable upstream. Absent: any address.
   */
  addresses?: AddressPolicy
}

/** An OpenAI-compatible upstream reached over a keep-alive undici Pool. */
export class OpenAICompatibleProvider implements Provider {
  private readonly pool: Pool
  /** A connection of its own, as the pool's are made: for the one retry of a request the upstream's close failed. */
  private readonly fresh: () => Client
  private readonly path: string
  private readonly embeddingsPath: string
  private readonly headers: Record<string, string>
  /** Why its address (an IP literal) may not be called, when it may not. */
  private readonly refused: string | null

  constructor(
    baseUrl: string,
    apiKey: string | undefined,
    private readonly timeouts: UpstreamTimeouts,
    { connections = 256, addresses }: UpstreamOptions = {},
  ) {
    const url = new URL(baseUrl)
    this.refused = addresses ? literalRefusal(url, addresses) : null
    const connection = {
      pipelining: 1,
      keepAliveTimeout: 10_000,
      ...(addresses ? { connect: { lookup: guardedLookup(addresses) } } : {}),
    }
    this.pool = new Pool(url.origin, { connections, ...connection })
    this.fresh = () => new Client(url.origin, connection)
    this.path = `${url.pathname.replace(/\/$/, '')}/chat/completions`
    this.embeddingsPath = `${url.pathname.replace(/\/$/, '')}/embeddings`
    this.headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
    if (apiKey) this.headers.authorization = `Bearer ${apiKey}`
  }

  async *stream(upstreamModel: string, request: UpstreamRequest, client: Cancel): AsyncIterable<UpstreamEvent[]> {
    if (this.refused !== null) {
      const refused = failure('unavailable', `upstream not called: ${this.refused}`)
      if (refused.type === 'failure') refused.failure.unreached = true
      yield [refused]
      return
    }
    // This attempt's own cancellation: the client's going away, or its time budget spent.
    const attempt = new Cancel()
    const onAbort = () => attempt.abort()
    client.once('abort', onAbort)
    if (client.aborted) attempt.abort()
    /** Why the attempt's timer ended it, once it has. */
    let timedOut: string | undefined
    const budgetMs = request.stream ? this.timeouts.firstByteTimeoutMs : this.timeouts.replyTimeoutMs
    const idleMs = this.timeouts.idleTimeoutMs
    let timer: NodeJS.Timeout | undefined = setTimeout(() => {
      timedOut = request.stream ? `no first event within ${budgetMs} ms` : `no reply within ${budgetMs} ms`
      attempt.abort()
    }, budgetMs)
    let streaming = false
    /** The stream's reader is suspended at a yield: the consumer has its events and has not asked for more. */
    let held = false
    const clearTimer = () => {
      if (timer) clearTimeout(timer)
      timer = undefined
    }
    /** The timer ran out while the consumer held the stream, and was restarted: counted again from its resuming. */
    let waited = false
    const idle = () => {
      // A consumer waiting for its own client (a slow reader) holds the upstream back: that is no silence of the
      // upstream.
      if (held) {
        waited = true
        return void timer?.refresh()
      }
      timedOut = `nothing more of the reply within ${idleMs} ms`
      attempt.abort()
    }
    /**
     * A stream's events arrived: from the first on, it may go no longer than idleTimeoutMs without more of the reply,
     * counted from when its consumer asks for more (`resumed`). Bytes that make no event and events that add nothing to
     * the reply do not count (docs/architecture.md §15.32).
     */
    const flow = {
      hold: () => {
        held = true
        if (streaming) return
        streaming = true
        clearTimer()
        timer = setTimeout(idle, idleMs)
      },
      resumed: (progressed: boolean) => {
        held = false
        if (progressed || waited) timer?.refresh()
        waited = false
      },
    }
    const why = (err: unknown): UpstreamEvent => {
      if (client.aborted) return failure('aborted', 'the client went away')
      if (timedOut) return failure('unavailable', timedOut)
      const e = err as { code?: string; message?: string; cause?: { code?: string } }
      const code = e.code ?? e.cause?.code
      // The address policy's refusal says which address and why; others are told by their code.
      const said = code === 'SVC_ADDRESS_REFUSED' ? (e.code ? e.message : (e.cause as Error).message) : code
      const f = failure('unavailable', `upstream connection failed: ${said ?? e.message ?? String(err)}`)
      if (isUnreached(code) && f.type === 'failure') f.failure.unreached = true
      return f
    }
    /** The connection of the attempt's retry, if it needed one: closed once its reply was read (or left). */
    let retried: Client | undefined
    const closeFresh = () => void retried?.close().catch(() => {})
    /**
     * Sends the request through the pool; when a kept-alive connection it went out on turns out closed by the
     * upstream (an engine that closes its connections after a stream, as llama.cpp's server does, races the next
     * request), nothing came back and nothing was served, so it is sent once more on a connection of its own.
     */
    const sent = async <T>(send: (dispatcher: Dispatcher) => Promise<T>): Promise<T> => {
      try {
        return await send(this.pool)
      } catch (err) {
        if (attempt.aborted || !closedBeforeReply(err)) throw err
        retried = this.fresh()
        return await send(retried)
      }
    }
    if (!request.stream) {
      let events: UpstreamEvent[]
      try {
        const body = requestBody(upstreamModel, request)
        // The reply is bounded as a whole by the timer above.
        const reply = await sent((dispatcher) =>
          plainExchange(
            dispatcher,
            {
              path: this.path,
              headers: this.headers,
              body,
              headersTimeout: budgetMs + 1000,
              bodyTimeout: budgetMs + 1000,
            },
            attempt,
            { errorBytes: MAX_ERROR_BODY, replyBytes: MAX_REPLY_BYTES },
          ),
        )
        events = plainEvents(reply)
      } catch (err) {
        events = [err instanceof ReplyTooLarge ? failure('invalid_output', err.message) : why(err)]
      } finally {
        clearTimer()
        client.removeListener('abort', onAbort)
        closeFresh()
      }
      yield events
      return
    }
    let res: Dispatcher.ResponseData
    /** The stream reached [DONE]. */
    let ended = false
    try {
      res = await untilAborted(
        attempt,
        sent((dispatcher) =>
          dispatcher.request({
            path: this.path,
            method: 'POST',
            headers: this.headers,
            body: requestBody(upstreamModel, request),
            signal: attempt,
            headersTimeout: budgetMs + 1000,
            // Bounded between its chunks (and between its events, by the timer above).
            bodyTimeout: idleMs,
          }),
        ),
        (late) => late.body.destroy(),
      )
    } catch (err) {
      clearTimer()
      client.removeListener('abort', onAbort)
      closeFresh()
      yield [why(err)]
      return
    }
    try {
      if (res.statusCode !== 200) {
        clearTimer()
        yield plainEvents({ status: res.statusCode, text: await readBounded(res.body, MAX_ERROR_BODY) })
        return
      }
      const type = String(res.headers['content-type'] ?? '')
      // An upstream may answer a stream request with a plain reply.
      if (!type.includes('text/event-stream')) {
        let text: string
        try {
          text = await readWhole(res.body, MAX_REPLY_BYTES)
        } catch (err) {
          yield [err instanceof ReplyTooLarge ? failure('invalid_output', err.message) : why(err)]
          return
        }
        clearTimer()
        yield plainEvents({ status: 200, text })
        return
      }
      ended = yield* this.readStream(res, flow, why)
    } finally {
      clearTimer()
      client.removeListener('abort', onAbort)
      // After [DONE] the rest of the body (the response's end, which comes with it) is read in the background, so the
      // connection goes back to the pool: destroyed before its end, undici would close it.
      if (ended) res.body.dump({ limit: Number.MAX_SAFE_INTEGER }).catch(() => {})
      else if (!res.body.destroyed) {
        // Left by the read loop (which does not destroy it) before its end: destroyed, it reports the abort as an
        // 'error' event that nothing else listens for any more.
        res.body.on('error', () => {})
        res.body.destroy()
      }
      closeFresh()
    }
  }

  /** Yields the stream's events; returns whether it reached [DONE] (the body may still have its end to read). */
  private async *readStream(
    res: Dispatcher.ResponseData,
    flow: StreamFlow,
    why: (err: unknown) => UpstreamEvent,
  ): AsyncGenerator<UpstreamEvent[], boolean> {
    const reader = new ChunkStream()
    // A finish reason: the upstream closing the stream after it is its end, not a break.
    let finished = false
    try {
      // Leaving the loop must not destroy the body: after [DONE] its end is still to read (the caller dumps it).
      for await (const bytes of res.body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
        const events: UpstreamEvent[] = []
        reader.push(bytes, events)
        if (reader.buffered > MAX_REPLY_BYTES && events[events.length - 1]?.type !== 'failure') {
          events.push(failure('invalid_output', `stream event larger than ${MAX_REPLY_BYTES / 1024 / 1024} MiB`))
        }
        if (events.length > 0) {
          if (!finished) finished = events.some((e) => e.type === 'finish')
          if (!reader.done) flow.hold()
          yield events
          flow.resumed(events.some(progressed))
          if (events[events.length - 1]!.type === 'failure') return false
        }
        // [DONE] is the stream's end, whatever the upstream then does with the connection.
        if (reader.done) return true
      }
    } catch (err) {
      const broke = why(err)
      // Past the finish reason the reply is whole: a reset, or silence until the timer, ends it as it is. The
      // client's leaving still counts as such.
      if (finished && !(broke.type === 'failure' && broke.failure.kind === 'aborted')) return false
      yield [broke]
      return false
    }
    const last: UpstreamEvent[] = []
    reader.end(last)
    if (last.some((e) => e.type === 'finish')) finished = true
    if (!reader.done && !finished && last[last.length - 1]?.type !== 'failure')
      last.push(failure('unavailable', 'upstream closed the stream before it finished'))
    if (last.length > 0) yield last
    return false
  }

  /** Embeds the inputs through the same pool (`embedExchange`), within the plain reply's time budget. */
  async embed(upstreamModel: string, request: EmbedRequest, cancel: Cancel): Promise<Embedded> {
    if (this.refused !== null)
      return {
        kind: 'failed',
        failure: { kind: 'unavailable', detail: `upstream not called: ${this.refused}`, unreached: true },
      }
    const o = {
      path: this.embeddingsPath,
      headers: this.headers,
      upstreamModel,
      timeoutMs: this.timeouts.replyTimeoutMs,
    }
    return embedExchange(this.pool, o, request, cancel)
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}

/** An event that adds to the reply: content, reasoning, or a tool call's arguments. */
function progressed(e: UpstreamEvent): boolean {
  return e.type === 'content' || e.type === 'reasoning' || (e.type === 'tool_delta' && !!e.arguments)
}
