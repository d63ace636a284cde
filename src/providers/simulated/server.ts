import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { drained, json, pause, readBody } from './http.js'
import { completion, FRAGMENTATIONS, toolDeltas, type Fragmentation } from './wire.js'
import { faultName, parseFault, type Fault } from './faults.js'
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
}
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
    if (req.method === 'GET' && url.endsWith('/models')) return json(res, 200, { object: 'list', data: [] })
    if (req.method !== 'POST' || !url.endsWith('/chat/completions'))
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
    this.stats.active++
    this.stats.maxActive = Math.max(this.stats.maxActive, this.stats.active)
    this.requests.push(body)
    if (this.requests.length > KEEP_REQUESTS) this.requests.shift()
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
    const behaviour = behaviourOf(this.settings.models, model)
    const refused = refusalOf(body, behaviour)
    if (refused) return json(res, 400, { error: { message: refused, type: 'invalid_request_error' } })
    if (behaviour.maxConcurrency > 0 && this.activeByModel.get(model)! > behaviour.maxConcurrency) {
      return json(
        res,
        429,
        { error: { message: `more than ${behaviour.maxConcurrency} concurrent requests` } },
        { 'retry-after': '1' },
      )
    }
    if (!(await pause(behaviour.latencyMs + (fault.kind === 'slow' ? fault.ms : 0), res))) return
    if (fault.kind === 'stall') {
      await new Promise<void>((resolve) => {
        this.stalled.push(resolve)
        res.once('close', resolve)
      })
      if (res.destroyed) return
    }
    if (fault.kind === 'status-500') return json(res, 500, { error: { message: 'simulated internal error' } })
    if (fault.kind === 'status-429')
      return json(res, 429, { error: { message: 'simulated rate limit' } }, { 'retry-after': '1' })
    const reply = planReply(actedOn(body, behaviour), this.settings, behaviour)
    cutLongArguments(reply.toolCalls, behaviour)
    if (fault.kind === 'bad-tool-args')
      for (const c of reply.toolCalls) c.arguments = c.arguments.slice(0, Math.max(1, c.arguments.length - 2))
    if (fault.kind === 'empty-tool-name') for (const c of reply.toolCalls) c.name = ''
    if (body.stream === true) return this.stream(model, reply, fault, res)
    if (fault.kind === 'garbage')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('<html>upstream exploded</html>')
    const text = JSON.stringify(completion(model, reply))
    if (fault.kind === 'break-after') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write(text.slice(0, text.length >> 1))
      return void setImmediate(() => req.socket.destroy())
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    res.end(text)
  }

  private async stream(model: string, reply: SimReply, fault: Fault, res: ServerResponse): Promise<void> {
    const id = `chatcmpl-sim${Date.now().toString(36)}`
    const created = Math.floor(Date.now() / 1000)
    const chunk = (delta: Record<string, unknown>, finish: string | null = null, logprobs?: unknown) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, ...(logprobs ? { logprobs } : {}), finish_reason: finish }] })}\n\n`
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    if (fault.kind === 'garbage')
      return void res.end('data: {"choices":[{"delta":{"content":"Hel\n\ndata: ]]} not json {{\n\n')
    // As a serving engine does, it produces no faster than the gateway reads.
    const write = async (text: string) => {
      if (res.destroyed) return false
      if (!res.write(text)) await drained(res)
      if (this.settings.chunkDelayMs > 0) await sleep(this.settings.chunkDelayMs)
      return !res.destroyed
    }
    if (!(await write(chunk({ role: 'assistant', content: '' })))) return
    // Breaks only after what was written reached the socket, so the client really saw it.
    const breakNow = () =>
      new Promise<void>((resolve) => res.write('', () => resolve())).then(() => void res.socket?.destroy())
    let sent = 0
    for (const [i, piece] of reply.pieces.entries()) {
      if (fault.kind === 'break-after' && sent >= fault.chunks) return breakNow()
      const logprobs = reply.logprobs && { content: [reply.logprobs[i]], refusal: null }
      if (!(await write(chunk({ content: piece }, null, logprobs)))) return
      sent++
    }
    if (fault.kind === 'break-after' && sent >= fault.chunks && reply.toolCalls.length) return breakNow()
    for (const delta of toolDeltas(reply.toolCalls, this.settings.fragmentation)) {
      if (!(await write(chunk({ tool_calls: [delta] })))) return
    }
    const usage = {
      prompt_tokens: reply.promptTokens,
      completion_tokens: reply.pieces.length,
      total_tokens: reply.promptTokens + reply.pieces.length,
    }
    if (!(await write(chunk({}, reply.finish)))) return
    if (
      !(await write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`,
      ))
    )
      return
    res.end('data: [DONE]\n\n')
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
  return out
}
