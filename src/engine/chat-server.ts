// An OpenAI-compatible chat completions server over a GGUF model run by node-llama-cpp: what a provider runs to serve
// a model file itself (and the real engine of the engine tests). Plain and streamed replies, max_tokens, temperature
// and seed, tool calls and response_format held to by grammars (constraint.ts), usage counted in the model's own
// tokens, the generation stopped when its client leaves.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { basename } from 'node:path'
import {
  loadNodeLlamaCpp,
  type ChatResponse,
  type GenerateOptions,
  type Llama,
  type LlamaContext,
  type NodeLlamaCpp,
} from './node-llama.js'
import { BadRequest, chatBody, type ChatBody } from './chat-body.js'
import { constraintOf, type Constraint } from './constraint.js'
import { Reply } from './reply.js'

export interface EngineServerOptions {
  modelFile: string
  /** The model's name in /v1/models and replies (default: the file's name without .gguf). */
  name?: string
  host?: string
  port?: number
  /** Requests generated at once, each in a sequence of its own (2). */
  sequences?: number
  /** Tokens of context per sequence (4096). */
  contextSize?: number
  /** CPU threads of the context (1: on a small machine more threads only contend). */
  threads?: number
}

const MAX_BODY = 4 * 1024 * 1024

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

const error = (res: ServerResponse, status: number, message: string) =>
  json(res, status, { error: { message, type: status < 500 ? 'invalid_request_error' : 'server_error', code: status } })

/** Waits its turn for one of `size` places. */
class Places {
  private free: number
  private readonly waiting: (() => void)[] = []
  constructor(size: number) {
    this.free = size
  }
  async take(): Promise<() => void> {
    if (this.free > 0) this.free--
    else await new Promise<void>((resolve) => this.waiting.push(resolve))
    let given = false
    return () => {
      if (given) return
      given = true
      const next = this.waiting.shift()
      if (next) next()
      else this.free++
    }
  }
}

export class EngineServer {
  /** Generations finished, and those stopped because their client left. */
  readonly stats = { served: 0, aborted: 0 }
  /** Requests under way, and when the last one came. */
  private active = 0
  private lastRequestAt = 0
  private readonly server: Server
  private readonly places: Places
  private constructor(
    private readonly loaded: { lib: NodeLlamaCpp; llama: Llama; context: LlamaContext; release: () => Promise<void> },
    readonly name: string,
    private readonly opts: EngineServerOptions,
  ) {
    this.places = new Places(opts.sequences ?? 2)
    this.server = createServer((req, res) => void this.handle(req, res))
  }

  static async start(opts: EngineServerOptions): Promise<EngineServer> {
    const lib = await loadNodeLlamaCpp()
    const llama = await lib.getLlama({ gpu: false, build: 'never', logLevel: 'error' })
    const model = await llama.loadModel({ modelPath: opts.modelFile })
    const context = await model.createContext({
      contextSize: opts.contextSize ?? 4096,
      sequences: opts.sequences ?? 2,
      threads: opts.threads ?? 1,
    })
    const release = async () => {
      await context.dispose()
      await model.dispose()
      await llama.dispose()
    }
    const name = opts.name ?? basename(opts.modelFile).replace(/\.gguf$/i, '')
    const server = new EngineServer({ lib, llama, context, release }, name, opts)
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject)
      server.server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve)
    })
    return server
  }

  /** Base URL, ending in /v1. */
  get url(): string {
    return `http://${this.opts.host ?? '127.0.0.1'}:${(this.server.address() as AddressInfo).port}/v1`
  }

  /**
   * Resolves once no request is under way and none came for `quietMs` (a marketplace that was told the endpoint left
   * routes elsewhere within seconds), or after `maxMs` whatever comes.
   */
  async drain(quietMs: number, maxMs: number): Promise<void> {
    const until = Date.now() + maxMs
    while (Date.now() < until && (this.active > 0 || Date.now() - this.lastRequestAt < quietMs))
      await new Promise((resolve) => setTimeout(resolve, 50))
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    await this.loaded.release()
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!
    if (req.method === 'GET' && path === '/v1/models')
      return json(res, 200, {
        object: 'list',
        data: [{ id: this.name, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'svc' }],
      })
    if (req.method !== 'POST' || path !== '/v1/chat/completions') return error(res, 404, `no route ${path}`)
    this.active++
    this.lastRequestAt = Date.now()
    res.once('close', () => this.active--)
    let body: ChatBody
    let constraint: Constraint
    try {
      body = chatBody(JSON.parse(await readBody(req)))
      constraint = await constraintOf(this.loaded.llama, body)
    } catch (err) {
      return error(res, 400, err instanceof BadRequest ? err.message : 'the body is not JSON')
    }
    const gone = new AbortController()
    res.once('close', () => gone.abort())
    const done = await this.places.take()
    try {
      if (gone.signal.aborted) return
      await this.generate(body, constraint, res, gone.signal)
    } catch (err) {
      if (!res.headersSent) error(res, 500, (err as Error).message)
      else res.destroy()
    } finally {
      done()
    }
  }

  private async generate(body: ChatBody, constraint: Constraint, res: ServerResponse, signal: AbortSignal) {
    // A sequence of its own: nothing of another request's state, so its input is counted whole.
    const sequence = this.loaded.context.getSequence()
    const chat = new this.loaded.lib.LlamaChat({ contextSequence: sequence, autoDisposeSequence: false })
    const head = {
      id: `chatcmpl-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
      created: Math.floor(Date.now() / 1000),
      model: this.name,
    }
    const reply = new Reply(head, body.stream ? res : undefined)
    try {
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
        reply.chunk({ role: 'assistant', content: '' })
      }
      const steering = steer(constraint, reply)
      const generated = await chat.generateResponse(body.history, {
        ...(body.maxTokens !== undefined ? { maxTokens: body.maxTokens } : {}),
        temperature: body.temperature,
        ...(body.seed !== undefined ? { seed: body.seed } : {}),
        signal,
        stopOnAbortSignal: true,
        ...steering.options,
      })
      if (signal.aborted) return void this.stats.aborted++
      this.stats.served++
      steering.after(generated)
      reply.end()
      const finish = generated.metadata.stopReason === 'maxTokens' ? 'length' : reply.hasCalls ? 'tool_calls' : 'stop'
      const used = sequence.tokenMeter
      const usage = {
        prompt_tokens: used.usedInputTokens,
        completion_tokens: used.usedOutputTokens,
        total_tokens: used.usedInputTokens + used.usedOutputTokens,
      }
      if (!body.stream) {
        const choices = [{ index: 0, message: reply.message(), finish_reason: finish }]
        return json(res, 200, { ...head, object: 'chat.completion', choices, usage })
      }
      reply.chunk({}, finish)
      if (body.usage)
        res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [], usage })}\n\n`)
      res.end('data: [DONE]\n\n')
    } finally {
      chat.dispose({ disposeSequence: true })
    }
  }
}

/**
 * How the generation feeds the reply under `constraint`: its grammar or functions and where its text goes, and what
 * of the reply is known only once it is generated.
 */
function steer(constraint: Constraint, reply: Reply): { options: GenerateOptions; after(r: ChatResponse): void } {
  const text = (t: string) => reply.text(t)
  const nothing = () => {}
  switch (constraint.kind) {
    case 'text':
      return { options: { onTextChunk: text }, after: nothing }
    case 'json':
      return { options: { grammar: constraint.grammar, onTextChunk: text }, after: nothing }
    case 'arguments': {
      const index = reply.call(constraint.name)
      return { options: { grammar: constraint.grammar, onTextChunk: (t) => reply.arguments(index, t) }, after: nothing }
    }
    case 'call':
      // Which tool it calls is known only once the JSON is whole: the call is written then, in one piece (nothing
      // when max_tokens cut it short).
      return {
        options: { grammar: constraint.grammar },
        after: (r) => {
          const call = parsed(r.response)
          if (typeof call?.name === 'string')
            reply.arguments(reply.call(call.name), JSON.stringify(call.arguments ?? {}))
        },
      }
    case 'functions': {
      // Each call's arguments as they are generated; a call whose arguments never came in pieces, whole at the end.
      const indexes = new Map<number, number>()
      const options: GenerateOptions = {
        functions: constraint.functions,
        onTextChunk: text,
        onFunctionCallParamsChunk: ({ callIndex, functionName, paramsChunk }) => {
          if (!indexes.has(callIndex)) indexes.set(callIndex, reply.call(functionName))
          reply.arguments(indexes.get(callIndex)!, paramsChunk)
        },
      }
      const after = (r: ChatResponse) =>
        (r.functionCalls ?? []).forEach((call, i) => {
          if (!indexes.has(i)) reply.arguments(reply.call(call.functionName), JSON.stringify(call.params ?? {}))
        })
      return { options, after }
    }
  }
}

function parsed(text: string): { name?: unknown; arguments?: unknown } | undefined {
  try {
    return JSON.parse(text) as { name?: unknown; arguments?: unknown }
  } catch {
    return undefined
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    if ((size += chunk.length) > MAX_BODY) throw new BadRequest(`the body is larger than ${MAX_BODY} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}
