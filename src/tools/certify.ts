import { createHash } from 'node:crypto'
import { TOOL_CHOICE_MODES, type ToolContract } from '../protocol/models.js'
import { METERING_VERSION } from '../metering/tokens.js'
import type { AddressPolicy } from '../providers/address-policy.js'
import { OpenAICompatibleProvider } from '../providers/openai-compatible.js'
import type { Provider } from '../providers/types.js'
import { Cancel } from '../providers/cancel.js'
import { ToolCallAssembler } from './assemble.js'
import {
  agentLoopProbe,
  argumentsProbe,
  concurrencyProbe,
  parallelProbe,
  strictFormatProbe,
  strictToolProbe,
  toolChoiceProbe,
  type Exchange,
  type ProbeOutcome,
  type Send,
} from './certify-probes.js'

/** Bumped whenever a probe changes what it asks or checks: certification ids of different suites never collide. */
export const SUITE_VERSION = 2

/** Times each tool_choice mode is asked by default: each message once (see `toolChoiceProbe`). */
export const DEFAULT_REPEATS = 3

export interface CertifyOptions {
  /** OpenAI-compatible base URL, ending in /v1. */
  baseUrl: string
  /** The model name the upstream knows. */
  model: string
  apiKey?: string
  /** Largest argument document to try; sizes grow 1 KiB, 4 KiB, 16 KiB, … up to it. */
  maxArgumentBytes?: number
  /** Most concurrent tool calls to try; levels double from 1 up to it. */
  maxConcurrency?: number
  /** Turns of the agent loop. */
  agentTurns?: number
  /**
   * Times each tool_choice mode is asked, plain and streamed, with other messages and pinned sampling (3): a mode is
   * certified only when every reply obeyed it.
   */
  repeats?: number
  /** Per request: until the first byte, and the longest silence after it. */
  timeoutMs?: number
  /** Injected for tests; otherwise an OpenAI-compatible adapter, the same one the gateway uses. */
  upstream?: Provider
  /** The addresses the adapter may connect to (an endpoint a wallet registered); any when absent. */
  addresses?: AddressPolicy
}

export interface ProbeResult extends ProbeOutcome {
  name: string
}

export interface Certification {
  base_url: string
  model: string
  /** What the upstream earned, or null when it cannot call tools at all (the auto probes failed). */
  tool_contract: ToolContract | null
  probes: ProbeResult[]
}

export class CertifyError extends Error {}

/** Runs the probe suite against an OpenAI-compatible upstream and derives the tool_contract it earned. */
export async function certify(opts: CertifyOptions): Promise<Certification> {
  const upstream = upstreamOf(opts, 60_000)
  const send: Send = (body, stream) => exchange(upstream, opts.model, body, stream)
  try {
    const hello = await send({ messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 }, false)
    if (!hello.ok)
      throw new CertifyError(
        `${opts.baseUrl} did not answer a plain chat request for model ${JSON.stringify(opts.model)}: ${hello.detail}`,
      )
    const probes = await runSuite(send, opts)
    return { base_url: opts.baseUrl, model: opts.model, tool_contract: earned(probes), probes }
  } finally {
    if (!opts.upstream) await upstream.close()
  }
}

/**
 * The probe an endpoint passes before its offers go live: it answers a chat completion plain and streamed and, when the
 * model has tools, makes a valid tool call plain and streamed. Null when it passes, else why not.
 */
export async function probeEndpoint(opts: CertifyOptions & { tools: boolean }): Promise<string | null> {
  const upstream = upstreamOf(opts, 15_000)
  const send: Send = (body, stream) => exchange(upstream, opts.model, body, stream)
  const hello = { messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 }
  try {
    for (const stream of [false, true]) {
      const x = await send(hello, stream)
      if (!x.ok) return `it did not answer a ${stream ? 'streamed' : 'plain'} chat completion: ${x.detail}`
      if (opts.tools) {
        const call = await toolChoiceProbe(send, 'required', stream)
        if (!call.passed) return `it made no valid tool call ${stream ? 'streamed' : 'plain'}: ${call.detail}`
      }
    }
    return null
  } finally {
    if (!opts.upstream) await upstream.close()
  }
}

/** The upstream under test: the injected one, or the gateway's own adapter with every timeout `opts.timeoutMs`. */
function upstreamOf(opts: CertifyOptions, defaultTimeoutMs: number): Provider {
  const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs
  if (opts.upstream) return opts.upstream
  return new OpenAICompatibleProvider(
    opts.baseUrl,
    opts.apiKey,
    { firstByteTimeoutMs: timeoutMs, replyTimeoutMs: timeoutMs, idleTimeoutMs: timeoutMs },
    opts.addresses ? { addresses: opts.addresses } : {},
  )
}

async function runSuite(send: Send, opts: CertifyOptions): Promise<ProbeResult[]> {
  const results: ProbeResult[] = []
  const run = async (name: string, probe: Promise<ProbeOutcome>) => {
    const outcome = await probe
    results.push({ name, ...outcome })
    return outcome.passed
  }
  for (const mode of TOOL_CHOICE_MODES) {
    for (const stream of [false, true]) {
      const passed = await run(
        `tool_choice.${mode}.${stream ? 'stream' : 'plain'}`,
        toolChoiceProbe(send, mode, stream, opts.repeats ?? DEFAULT_REPEATS),
      )
      // An upstream that cannot even make an auto call has no tool contract; the rest would only fail slowly.
      if (mode === 'auto' && !passed) return results
    }
  }
  await run('parallel_tool_calls.true', parallelProbe(send, true))
  await run('parallel_tool_calls.false', parallelProbe(send, false))
  await run('strict.tools', strictToolProbe(send))
  await run('strict.response_format', strictFormatProbe(send))
  for (let bytes = 1024; bytes <= (opts.maxArgumentBytes ?? 65_536); bytes *= 4) {
    if (!(await run(`arguments.${bytes}`, argumentsProbe(send, bytes)))) break
  }
  await run('agent_loop', agentLoopProbe(send, opts.agentTurns ?? 3))
  for (let n = 1; n <= (opts.maxConcurrency ?? 32); n *= 2) {
    if (!(await run(`concurrency.${n}`, concurrencyProbe(send, n)))) break
  }
  return results
}

/** The contract the probe results earn; null when tools do not work at all. */
export function earned(probes: readonly ProbeResult[]): ToolContract | null {
  const passed = (name: string) => probes.some((p) => p.name === name && p.passed)
  const tool_choice = TOOL_CHOICE_MODES.filter(
    (m) => passed(`tool_choice.${m}.plain`) && passed(`tool_choice.${m}.stream`),
  )
  if (!tool_choice.includes('auto')) return null
  const levels = (prefix: string) =>
    probes.filter((p) => p.passed && p.name.startsWith(prefix)).map((p) => Number(p.name.slice(prefix.length)))
  // Without a passing size probe, the largest document the tool_choice probes delivered is what was certified.
  const seen = Math.max(
    0,
    ...probes.filter((p) => p.passed && p.name.startsWith('tool_choice.')).map((p) => p.bytes ?? 0),
  )
  return {
    tool_choice,
    parallel_tool_calls: passed('parallel_tool_calls.true') && passed('parallel_tool_calls.false'),
    strict_schemas: passed('strict.tools') && passed('strict.response_format'),
    // The gateway assembles every call and delivers it whole, whatever the upstream's fragmentation.
    tool_streaming: 'whole-call',
    max_argument_bytes: Math.max(seen, ...levels('arguments.')),
    certified_concurrency: Math.max(0, ...levels('concurrency.')),
    agentic_certified: passed('agent_loop'),
    metering_version: METERING_VERSION,
    certification_id: certificationId(probes),
  }
}

/**
 * A hash of the probe results (names, verdicts, sizes; not the free-text details), so anyone re-running the
 * suite against the same upstream can check the id, and a changed behaviour yields another id.
 */
export function certificationId(probes: readonly ProbeResult[]): string {
  const results = probes.map((p) => [p.name, p.passed, p.bytes ?? null])
  const digest = createHash('sha256')
    .update(JSON.stringify({ suite: SUITE_VERSION, metering_version: METERING_VERSION, results }))
    .digest('hex')
  return `cert-${digest.slice(0, 16)}`
}

/** One request through the gateway's own upstream adapter and tool-call assembler. */
async function exchange(
  upstream: Provider,
  model: string,
  body: Record<string, unknown>,
  stream: boolean,
): Promise<Exchange> {
  const tools = new ToolCallAssembler()
  let content = ''
  for await (const events of upstream.stream(model, { bodyJson: JSON.stringify(body), stream }, new Cancel())) {
    for (const ev of events) {
      if (ev.type === 'content') content += ev.text
      else if (ev.type === 'tool_delta') {
        const unusable = tools.add(ev.index, ev.id, ev.name, ev.arguments)
        if (unusable) return { ok: false, detail: unusable }
      } else if (ev.type === 'failure') return { ok: false, detail: ev.failure.detail }
    }
  }
  return { ok: true, content, calls: tools.result() }
}
