import { MAX_TOOL_CALLS, type ChatRequest, type ToolCall } from '../protocol/chat.js'

interface Partial {
  id: string
  name: string
  arguments: string
}

/** Most calls one reply may make, and the longest name a call may have (a declared tool's name is 64 at most). */
export const MAX_CALLS = MAX_TOOL_CALLS
const MAX_NAME = 64

/**
 * Assembles tool-call deltas in any fragmentation (ids and names first, arguments split anywhere, indices interleaved).
 */
export class ToolCallAssembler {
  private readonly calls = new Map<number, Partial>()
  private last = -1
  /** The highest index any call has: where a call without one starts (kept, not searched for: one delta at a time). */
  private highest = -1

  /**
   * Adds one delta. One without `index` (Gemini's endpoint) starts a new call when its id is not the latest call's,
   * else continues it (read as 0, several calls would merge). Returns why the reply cannot be used: more than MAX_CALLS
   * calls, or a name longer than any tool's (arguments are bounded by the caller: max_tokens, or the reply's size).
   */
  add(index: number | undefined, id?: string, name?: string, args?: string): string | undefined {
    const at = index ?? this.slotOf(id)
    let call = this.calls.get(at)
    if (!call) {
      if (this.calls.size === MAX_CALLS) return `more than ${MAX_CALLS} tool calls`
      call = { id: '', name: '', arguments: '' }
      this.calls.set(at, call)
      if (at > this.highest) this.highest = at
    }
    this.last = at
    if (id && !call.id) call.id = id
    // Most upstreams send the name once; some repeat it whole in later fragments, a few split it.
    if (name && name !== call.name) {
      call.name += name
      if (call.name.length > MAX_NAME) return `a tool call's name longer than ${MAX_NAME} characters`
    }
    if (args) call.arguments += args
    return undefined
  }

  private slotOf(id: string | undefined): number {
    if (this.last < 0) return 0
    const latest = this.calls.get(this.last)!
    if (id && latest.id && id !== latest.id) return this.highest + 1
    return this.last
  }

  get size(): number {
    return this.calls.size
  }

  /** The calls in index order, in the chat completions shape. */
  result(): ToolCall[] {
    return [...this.calls.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([, c]) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }))
  }
}

/** What a request allows a reply to call: its declared tools under its tool_choice and parallel_tool_calls. */
export interface CallPolicy {
  /** Names the request declared; a call to anything else is refused. */
  declared: ReadonlySet<string>
  /** `none` forbids calls, `required` demands one, `{name}` allows only that tool; `auto` leaves it to the model. */
  choice: 'auto' | 'none' | 'required' | { name: string }
  /** parallel_tool_calls false: at most one call per reply. */
  single: boolean
}

export function callPolicyOf(req: Pick<ChatRequest, 'tools' | 'tool_choice' | 'parallel_tool_calls'>): CallPolicy {
  const choice = req.tool_choice
  return {
    declared: new Set((req.tools ?? []).map((t) => t.function.name)),
    choice: choice === undefined ? 'auto' : typeof choice === 'string' ? choice : { name: choice.function.name },
    single: req.parallel_tool_calls === false,
  }
}

export interface ToolRules extends CallPolicy {
  /** Largest certified argument document in bytes; 0 means untested (no limit enforced). */
  maxArgumentBytes: number
}

/**
 * Why the calls of a finished reply cannot be delivered, or null when they can: each call needs an id, a declared
 * non-empty name and arguments that parse as a JSON object within the size limit (docs/interface.md §2.2); together
 * they must obey the request's tool_choice and parallel_tool_calls, which an upstream may silently ignore.
 */
export function invalidToolCall(calls: readonly ToolCall[], rules: ToolRules): string | null {
  for (const [i, c] of calls.entries()) {
    if (!c.id) return `tool call ${i} has no id`
    if (!c.function.name) return `tool call ${i} has an empty name`
    if (!rules.declared.has(c.function.name))
      return `tool call ${i} names undeclared tool ${JSON.stringify(c.function.name)}`
    if (rules.maxArgumentBytes > 0 && Buffer.byteLength(c.function.arguments) > rules.maxArgumentBytes) {
      return `tool call ${i} arguments exceed ${rules.maxArgumentBytes} bytes`
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(c.function.arguments)
    } catch {
      return `tool call ${i} arguments are not valid JSON`
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      return `tool call ${i} arguments are not a JSON object`
  }
  const choice = rules.choice
  if (choice === 'none' && calls.length > 0) return 'the reply calls a tool although tool_choice is none'
  if (choice === 'required' && calls.length === 0) return 'the reply calls no tool although tool_choice is required'
  if (typeof choice === 'object') {
    if (calls.length === 0) return `the reply does not call ${JSON.stringify(choice.name)}, which tool_choice names`
    const other = calls.find((c) => c.function.name !== choice.name)
    if (other)
      return `the reply calls ${JSON.stringify(other.function.name)} although tool_choice names ${JSON.stringify(choice.name)}`
  }
  if (rules.single && calls.length > 1)
    return `the reply makes ${calls.length} tool calls although parallel_tool_calls is false`
  // Clients match tool results to calls by id, so two calls with one id cannot both be answered.
  if (calls.length > 1 && new Set(calls.map((c) => c.id)).size < calls.length) return 'two tool calls share one id'
  return null
}
