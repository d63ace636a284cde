import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { drained, json, pause, readBody } from './http.js'
import { embeddingsReply } from './embeddings.js'
import { FRAGMENTATIONS, type Fragmentation } from './wire.js'
import { DIALECT_NAMES, DIALECTS, type Dialect, type DialectName, type StreamContext } from './dialects/index.js'
import { faultName, parseFault, type Fault } from './faults.js'
import { cheatOf, cheated, jittered } from './cheats.js'
import { planReply, type SimReply } from './reply.js'
import { actedOn, behaviourOf, behavioursProblem, cutLongArguments, refusalOf, type Behaviours } from './behaviour.js'

export interface SimSettings {
  /** Words (≈ o200k tokens) in a text reply, before max_tokens cuts it. */
  replyTokens: number
  /** Pause between two streamed chunks. */
  chunkDelayMs: number
  /**
   * How tool-call arguments are cut into stream deltas: `bytes` is one character a delta with the calls' indices
   * interleaved; `unindexed` cuts like `split` but omits `index`, as Gemini's OpenAI-compatible endpoint does.
   */
  fragmentation: Fragmentation
  /** Text streamed before tool calls (none by default, so a tool-only reply has no content). */
  toolPreface: string
  /** Tool abilities per upstream model name (see behaviour.ts); models not listed can do everything. */
  models: Behaviours
  /** A misbehaving upstream: replies `replyTokens` words whatever max_tokens asks. */
  ignoreMaxTokens: boolean
  /** Words of reasoning before each reply (0: none); max_tokens bounds reasoning and reply together. */
  reasoningTokens: number
  /** The serving engine whose wire it speaks (dialects/). */
  dialect: DialectName
  /**
   * Closes a connection this long after a streamed reply ended, dropping any request that reaches it meanwhile
   * (llama.cpp's server does so after 1 ms); unset: as the dialect's engine does.
   */
  closeAfterStreamMs?: number
  /**
   * Honest noise, as nondeterministic kernels give: each token's log probability moved by up to ± this many
   * thousandths of a nat, at random (0: exact).
   */
  logprobNoiseMilli: number
}

export interface SimOptions extends Partial<SimSettings> {
  port?: number
  host?: string
  fault?: Fault
  apiKey?: string
}

const DEFAULTS: SimSettings = {
  replyTokens: 12,
  chunkDelayMs: 0,
  fragmentation: 'split',
  toolPreface: '',
  models: {},
  ignoreMaxTokens: false,
  reasoningTokens: 0,
  dialect: 'openai',
  logprobNoiseMilli: 0,
}
interface Exchange {
  req: IncomingMessage
  res: ServerResponse
}

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }
const KEEP_REQUESTS = 200

/** A simulated OpenAI-compatible upstream (plain and SSE), with fault modes switchable at `POST /_sim/fault`. */
export class SimulatedProvider {
  fault: Fault
  settings: SimSettings
  readonly stats = { requests: 0, active: 0, maxActive: 0 }
  /** The most recent request bodies, newest last. */
  readonly requests: Record<string, unknown>[] = []
  private readonly server: Server
  private readonly activeByModel = new Map<string, number>()
  /** Connections the engine is closing after a streamed reply (see `closeAfterStreamMs`). */
  private readonly closing = new WeakSet<Socket>()
  /** Requests answered under a cheat, for `sometimes` to spread its share over. */
  private cheatable = 0

  private constructor(private readonly opts: SimOptions) {
    this.fault = opts.fault ?? { kind: 'none' }
    this.settings = { ...DEFAULTS, ...pickSettings(opts) }
    this.server = createServer((req, res) => void this.handle(req, res))
    this.server.keepAliveTimeout = 30_000
  }

  static async start(opts: SimOptions = {}): Promise<SimulatedProvider> {
    const sim = new SimulatedProvider(opts)
    await new Promise<void>((resolve, reject) => {
      sim.server.once('error', reject)
      sim.server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve)
    })
    return sim
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  /** Base URL as a provider's `baseUrl` (ends in /v1). */
  get url(): string {
    return `http://${this.opts.host ?? '127.0.0.1'}:${this.port}/v1`
  }

  setFault(fault: Fault): void {
    this.fault = fault
    if (fault.kind !== 'stall') this.unstall()
  }

  private stalled: (() => void)[] = []

  private unstall(): void {
    for (const go of this.stalled.splice(0)) go()
  }

  async close(): Promise<void> {
    this.unstall()
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/'
    if (url.startsWith('/_sim/')) return this.control(req, res, url)
    if (this.fault.kind === 'refuse-connections') return void req.socket.resetAndDestroy()
    if (this.closing.has(req.socket)) return void req.socket.destroy()
    if (req.method === 'GET' && url.endsWith('/models'))
      return json(res, 200, this.dialect.modelList(Object.keys(this.settings.models)))
    const embeddings = req.method === 'POST' && url.endsWith('/embeddings')
    if (!embeddings && (req.method !== 'POST' || !url.endsWith('/chat/completions')))
      return json(res, 404, { error: { message: 'not found' } })
    if (this.opts.apiKey && req.headers.authorization !== `Bearer ${this.opts.apiKey}`)
      return json(res, 401, { error: { message: 'bad key' } })
    let body: Record<string, unknown>
    try {
      body = JSON.parse(await readBody(req))
    } catch {
      return json(res, 400, { error: { message: 'invalid JSON' } })
    }
    this.stats.requests++
    this.requests.push(body)
    if (this.requests.length > KEEP_REQUESTS) this.requests.shift()
    if (embeddings) return this.embeddings(body, res)
    this.stats.active++
    this.stats.maxActive = Math.max(this.stats.maxActive, this.stats.active)
    const model = String(body.model)
    this.activeByModel.set(model, (this.activeByModel.get(model) ?? 0) + 1)
    try {
      await this.answer(body, req, res)
    } finally {
      this.stats.active--
      this.activeByModel.set(model, this.activeByModel.get(model)! - 1)
    }
  }

  private async answer(body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const fault = this.fault
    const model = String(body.model)
    const dialect = this.dialect
    const behaviour = behaviourOf(this.settings.models, model, dialect.behaviour)
    const refused = refusalOf(body, behaviour)
    if (refused) return this.error(res, 400, refused)
    if (behaviour.maxConcurrency > 0 && this.activeByModel.get(model)! > behaviour.maxConcurrency)
      return this.error(res, 429, `more than ${behaviour.maxConcurrency} concurrent requests`, { 'retry-after': '1' })
    if (!(await pause(behaviour.latencyMs + (fault.kind === 'slow' ? fault.ms : 0), res))) return
    if (fault.kind === 'stall') {
      await new Promise<void>((resolve) => {
        this.stalled.push(resolve)
        res.once('close', resolve)
      })
      if (res.destroyed) return
    }
    if (fault.kind === 'status-500') return this.error(res, 500, 'simulated internal error')
    if (fault.kind === 'status-429') return this.error(res, 429, 'simulated rate limit', { 'retry-after': '1' })
    const acted = actedOn(body, behaviour)
    const honest = jittered(planReply(acted, this.settings, behaviour), this.settings.logprobNoiseMilli)
    const cheat = cheatOf(fault, this.cheatable++)
    const reply = cheat
      ? cheated(honest, cheat, () => planReply({ ...acted, model: `${model}~substitute` }, this.settings, behaviour))
      : honest
    cutLongArguments(reply.toolCalls, behaviour)
    if (fault.kind === 'bad-tool-args')
      for (const c of reply.toolCalls) c.arguments = c.arguments.slice(0, Math.max(1, c.arguments.length - 2))
    if (fault.kind === 'empty-tool-name') for (const c of reply.toolCalls) c.name = ''
    if (fault.kind === 'abort-after') abortAfter(reply, fault.chunks, dialect.abortReason)
    const stream = {
      model,
      id: dialect.completionId(),
      created: Math.floor(Date.now() / 1000),
      usage: (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
      fragmentation: this.settings.fragmentation,
    }
    const refusal = fault.kind === 'refuse-in-stream' ? ([400, 'simulated invalid request'] as const) : undefined
    const failing = fault.kind === 'error-after' ? ([500, 'simulated generation error'] as const) : undefined
    if (body.stream === true) {
      // An engine that reports such an error before any output in its stream does so; the others answer it plainly.
      const early = refusal ?? (fault.kind === 'error-after' && fault.chunks === 0 ? failing : undefined)
      if (early) {
        const text = dialect.streamError(early[0], early[1], stream, 0)
        if (text === undefined) return this.error(res, early[0], early[1])
        return void res.writeHead(200, SSE_HEADERS).end(text)
      }
      return this.stream(reply, stream, fault, { req, res })
    }
    const error = refusal ?? failing
    if (error) return this.error(res, error[0], error[1])
    if (fault.kind === 'garbage')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('<html>upstream exploded</html>')
    const text = dialect.completion(reply, stream)
    if (fault.kind === 'break-after') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write(text.slice(0, text.length >> 1))
      return void setImmediate(() => req.socket.destroy())
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    res.end(text)
  }

  /**
   * `POST /v1/embeddings`: deterministic unit vectors (`simulatedEmbedding`), `dimensions` long when asked; the 5xx,
   * 429 and slow faults apply as to chat.
   */
  private async embeddings(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const fault = this.fault
    if (fault.kind === 'slow' && !(await pause(fault.ms, res))) return
    if (fault.kind === 'status-500') return this.error(res, 500, 'simulated internal error')
    if (fault.kind === 'status-429') return this.error(res, 429, 'simulated rate limit', { 'retry-after': '1' })
    const reply = embeddingsReply(body)
    if (typeof reply === 'string') return this.error(res, 400, reply)
    json(res, 200, reply)
  }

  /** The engine's error reply of `status`'s kind, in its dialect. */
  private error(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
    const reply = this.dialect.errorReply(status, message)
    json(res, reply.status, reply.body, headers)
  }

  private get dialect(): Dialect {
    return DIALECTS[this.settings.dialect]
  }

  private async stream(reply: SimReply, c: StreamContext, fault: Fault, exchange: Exchange): Promise<void> {
    const { req, res } = exchange
    res.writeHead(200, SSE_HEADERS)
    if (fault.kind === 'garbage')
      return void res.end('data: {"choices":[{"delta":{"content":"Hel\n\ndata: ]]} not json {{\n\n')
    // As a serving engine does, it produces no faster than the gateway reads.
    const write = async (text: string) => {
      if (res.destroyed) return false
      if (!res.write(text)) await drained(res)
      if (this.settings.chunkDelayMs > 0) await sleep(this.settings.chunkDelayMs)
      return !res.destroyed
    }
    // Breaks only after what was written reached the socket, so the client really saw it.
    const breakNow = () =>
      new Promise<void>((resolve) => res.write('', () => resolve())).then(() => void res.socket?.destroy())
    let sent = 0
    for (const frame of this.dialect.frames(reply, c)) {
      if (frame.kind === 'output') {
        if (fault.kind === 'break-after' && sent >= fault.chunks) return breakNow()
        if (fault.kind === 'error-after' && sent >= fault.chunks)
          return void res.end(this.dialect.streamError(500, 'simulated generation error', c, sent) ?? '')
        sent++
      }
      if (!(await write(frame.text))) return
    }
    res.end()
    const linger = this.settings.closeAfterStreamMs ?? this.dialect.closeAfterStreamMs
    if (linger !== undefined) {
      // The engine closes the connection it kept alive; a request that reaches it meanwhile is dropped.
      const socket = req.socket
      this.closing.add(socket)
      res.once('finish', () => setTimeout(() => socket.destroy(), linger).unref())
    }
  }

  private async control(req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
    if (req.method === 'GET' && url === '/_sim/state') {
      return json(res, 200, { fault: faultName(this.fault), settings: this.settings, stats: this.stats })
    }
    if (req.method !== 'POST') return json(res, 405, { error: { message: 'POST only' } })
    let body: Record<string, unknown>
    try {
      body = JSON.parse((await readBody(req)) || '{}')
    } catch {
      return json(res, 400, { error: { message: 'invalid JSON' } })
    }
    if (url === '/_sim/fault') {
      const fault = parseFault(String(body.mode ?? ''))
      if (!fault) return json(res, 400, { error: { message: `unknown fault mode ${String(body.mode)}` } })
      this.setFault(fault)
      return json(res, 200, { fault: faultName(fault) })
    }
    if (url === '/_sim/settings') {
      const problem = body.models === undefined ? null : behavioursProblem(body.models)
      if (problem) return json(res, 400, { error: { message: `models: ${problem}` } })
      this.settings = { ...this.settings, ...pickSettings(body as Partial<SimSettings>) }
      return json(res, 200, { settings: this.settings })
    }
    return json(res, 404, { error: { message: 'unknown control endpoint' } })
  }
}

function pickSettings(given: Partial<SimSettings>): Partial<SimSettings> {
  // Settings come from a JSON request too (`POST /_sim/settings`): each is checked, whatever its type says.
  const o = given as { [K in keyof SimSettings]?: unknown }
  const out: Partial<SimSettings> = {}
  if (typeof o.replyTokens === 'number') out.replyTokens = o.replyTokens
  if (typeof o.chunkDelayMs === 'number') out.chunkDelayMs = o.chunkDelayMs
  if (FRAGMENTATIONS.includes(o.fragmentation as Fragmentation)) out.fragmentation = o.fragmentation as Fragmentation
  if (typeof o.toolPreface === 'string') out.toolPreface = o.toolPreface
  if (typeof o.models === 'object' && o.models !== null && !Array.isArray(o.models)) out.models = o.models as Behaviours
  if (typeof o.ignoreMaxTokens === 'boolean') out.ignoreMaxTokens = o.ignoreMaxTokens
  if (Number.isSafeInteger(o.reasoningTokens) && (o.reasoningTokens as number) >= 0)
    out.reasoningTokens = o.reasoningTokens as number
  if (DIALECT_NAMES.includes(o.dialect as DialectName)) out.dialect = o.dialect as DialectName
  if (Number.isSafeInteger(o.closeAfterStreamMs) && (o.closeAfterStreamMs as number) >= 0)
    out.closeAfterStreamMs = o.closeAfterStreamMs as number
  if (Number.isSafeInteger(o.logprobNoiseMilli) && (o.logprobNoiseMilli as number) >= 0)
    out.logprobNoiseMilli = o.logprobNoiseMilli as number
  return out
}

/** The reply cut after its first `chunks` output tokens (reasoning first), ended with the engine's abort reason. */
function abortAfter(reply: SimReply, chunks: number, reason: string): void {
  reply.reasoning = reply.reasoning.slice(0, chunks)
  reply.pieces = reply.pieces.slice(0, Math.max(0, chunks - reply.reasoning.length))
  reply.toolCalls = []
  reply.finish = reason
  delete reply.logprobs
}
