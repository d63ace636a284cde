import type { ToolCall } from '../protocol/chat.js'

interface Partial {
  id: string
  name: string
  arguments: string
}

/** Assembles tool-call deltas in any fragmentation (ids and names first, arguments split anywhere, indices interleaved). */
export class ToolCallAssembler {
  private readonly calls = new Map<number, Partial>()

  add(index: number, id?: string, name?: string, args?: string): void {
    let call = this.calls.get(index)
    if (!call) {
      call = { id: '', name: '', arguments: '' }
      this.calls.set(index, call)
    }
    if (id && !call.id) call.id = id
    // Most upstreams send the name once; some repeat it whole in later fragments, a few split it.
    if (name && name !== call.name) call.name += name
    if (args) call.arguments += args
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

export interface ToolRules {
  /** Names the request declared; a call to anything else is refused. */
  declared: ReadonlySet<string>
  /** Largest certified argument document in bytes; 0 means untested (no limit enforced). */
  maxArgumentBytes: number
}

/** Why a call cannot be delivered, or null when every call is valid (spec §2.2: id, non-empty name, JSON object arguments). */
export function invalidToolCall(calls: readonly ToolCall[], rules: ToolRules): string | null {
  for (const [i, c] of calls.entries()) {
    if (!c.id) return `tool call ${i} has no id`
    if (!c.function.name) return `tool call ${i} has an empty name`
    if (!rules.declared.has(c.function.name)) return `tool call ${i} names undeclared tool ${JSON.stringify(c.function.name)}`
    if (rules.maxArgumentBytes > 0 && Buffer.byteLength(c.function.arguments) > rules.maxArgumentBytes) {
      return `tool call ${i} arguments exceed ${rules.maxArgumentBytes} bytes`
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(c.function.arguments)
    } catch {
      return `tool call ${i} arguments are not valid JSON`
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return `tool call ${i} arguments are not a JSON object`
  }
  return null
}
