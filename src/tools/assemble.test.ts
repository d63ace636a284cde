import { describe, expect, it } from 'vitest'
import type { ToolCall } from '../protocol/chat.js'
import { callPolicyOf, invalidToolCall, MAX_CALLS, ToolCallAssembler, type ToolRules } from './assemble.js'

const A = { id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris","note":"ünïcode ✓"}' }
const B = { id: 'call_b', name: 'get_time', arguments: '{"timezone":"Europe/Paris"}' }
const call = (c: typeof A): ToolCall => ({
  id: c.id,
  type: 'function',
  function: { name: c.name, arguments: c.arguments },
})

/** A deterministic pseudo-random source, so a failing cut can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32
}

/** Cuts a call into deltas: id and name (possibly split) first, arguments cut at random places. */
function cut(c: typeof A, index: number, rand: () => number) {
  const out: { index: number; id?: string; name?: string; arguments?: string }[] = []
  const split = Math.floor(rand() * c.name.length)
  out.push({ index, id: c.id, name: c.name.slice(0, split) || c.name })
  if (split > 0) out.push({ index, name: c.name.slice(split) })
  for (let i = 0; i < c.arguments.length;) {
    const n = 1 + Math.floor(rand() * 6)
    out.push({ index, arguments: c.arguments.slice(i, i + n) })
    i += n
  }
  return out
}

describe('ToolCallAssembler', () => {
  it('refuses a reply of more calls than it keeps, or a name longer than any tool has, however it comes', () => {
    const many = new ToolCallAssembler()
    for (let i = 0; i < MAX_CALLS; i++) expect(many.add(i, `call_${i}`, 'f', '{}')).toBeUndefined()
    // More of a call it has is fine; another call is not.
    expect(many.add(3, undefined, undefined, ' ')).toBeUndefined()
    expect(many.add(MAX_CALLS, 'call_x', 'f')).toMatch(/more than 128 tool calls/)
    expect(many.size).toBe(MAX_CALLS)
    const long = new ToolCallAssembler()
    // Names repeated whole are one name; pieces of one add up.
    for (let i = 0; i < 10; i++) expect(long.add(0, 'call_1', 'get_weather')).toBeUndefined()
    for (let i = 0; i < 5; i++) expect(long.add(0, undefined, `_part${i}`)).toBeUndefined()
    expect(long.add(0, undefined, 'x'.repeat(30))).toMatch(/name longer than 64/)
  })

  it('assembles calls cut anywhere and interleaved in any order, for 200 random cuts', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rand = rng(seed)
      const a = cut(A, 0, rand)
      const b = cut(B, 1, rand)
      const asm = new ToolCallAssembler()
      // Interleave: each call's own order is kept, the two streams are merged at random.
      while (a.length || b.length) {
        const from = !b.length || (a.length && rand() < 0.5) ? a : b
        const d = from.shift()!
        asm.add(d.index, d.id, d.name, d.arguments)
      }
      expect(asm.result(), `seed ${seed}`).toEqual([call(A), call(B)])
    }
  })

  it('orders calls by index, not by arrival', () => {
    const asm = new ToolCallAssembler()
    asm.add(1, B.id, B.name, B.arguments)
    asm.add(0, A.id, A.name, A.arguments)
    expect(asm.result()).toEqual([call(A), call(B)])
  })

  it('keeps a name repeated whole in later fragments once', () => {
    const asm = new ToolCallAssembler()
    asm.add(0, A.id, A.name, '{"city":')
    asm.add(0, A.id, A.name, '"Paris","note":"ünïcode ✓"}')
    expect(asm.result()).toEqual([call(A)])
  })

  it('separates calls of an upstream that omits index, by their ids (Gemini style)', () => {
    const asm = new ToolCallAssembler()
    asm.add(undefined, A.id, A.name, '')
    asm.add(undefined, undefined, undefined, A.arguments.slice(0, 5))
    asm.add(undefined, A.id, undefined, A.arguments.slice(5))
    asm.add(undefined, B.id, B.name, B.arguments)
    expect(asm.result()).toEqual([call(A), call(B)])
  })

  it('numbers the calls of an upstream that omits index in their order, up to its limit', () => {
    const asm = new ToolCallAssembler()
    for (let i = 0; i < MAX_CALLS; i++) expect(asm.add(undefined, `call_${i}`, 'f', `{"n":${i}}`)).toBeUndefined()
    expect(asm.result().map((c) => c.function.arguments)).toEqual(
      Array.from({ length: MAX_CALLS }, (_, i) => `{"n":${i}}`),
    )
    expect(asm.add(undefined, 'call_more', 'f')).toMatch(/more than 128 tool calls/)
  })
})

describe('invalidToolCall', () => {
  const rules = (extra: Partial<ToolRules> = {}): ToolRules => ({
    declared: new Set([A.name, B.name]),
    choice: 'auto',
    single: false,
    maxArgumentBytes: 0,
    ...extra,
  })
  const withArgs = (args: string, name = A.name, id = A.id): ToolCall => ({
    id,
    type: 'function',
    function: { name, arguments: args },
  })

  it.each<[string, ToolCall[], Partial<ToolRules>, RegExp]>([
    ['no id', [withArgs('{}', A.name, '')], {}, /has no id/],
    ['an empty name', [withArgs('{}', '')], {}, /empty name/],
    ['an undeclared name', [withArgs('{}', 'rm_rf')], {}, /undeclared tool "rm_rf"/],
    ['cut JSON', [withArgs('{"city":"Par')], {}, /not valid JSON/],
    ['empty arguments', [withArgs('')], {}, /not valid JSON/],
    ['a JSON array', [withArgs('[1]')], {}, /not a JSON object/],
    ['JSON null', [withArgs('null')], {}, /not a JSON object/],
    ['a JSON string', [withArgs('"{}"')], {}, /not a JSON object/],
    ['arguments over the limit', [withArgs(`{"a":"${'x'.repeat(20)}"}`)], { maxArgumentBytes: 20 }, /exceed 20 bytes/],
    ['a call under tool_choice none', [call(A)], { choice: 'none' }, /tool_choice is none/],
    ['no call under tool_choice required', [], { choice: 'required' }, /calls no tool/],
    [
      'another tool than the named one',
      [call(A)],
      { choice: { name: B.name } },
      /calls "get_weather" although tool_choice names "get_time"/,
    ],
    ['no call under a named tool_choice', [], { choice: { name: B.name } }, /does not call "get_time"/],
    ['two calls under parallel_tool_calls false', [call(A), call(B)], { single: true }, /2 tool calls/],
    ['two calls with one id', [call(A), { ...call(B), id: A.id }], {}, /share one id/],
  ])('refuses %s', (_what, calls, extra, why) => {
    expect(invalidToolCall(calls, rules(extra))).toMatch(why)
  })

  it('accepts valid calls, the byte limit counting UTF-8 bytes exactly', () => {
    const bytes = Buffer.byteLength(A.arguments)
    expect(invalidToolCall([call(A), call(B)], rules())).toBeNull()
    expect(
      invalidToolCall([call(A)], rules({ maxArgumentBytes: bytes, choice: { name: A.name }, single: true })),
    ).toBeNull()
    expect(invalidToolCall([call(A)], rules({ maxArgumentBytes: bytes - 1 }))).toMatch(/exceed/)
    expect(invalidToolCall([], rules({ choice: 'none' }))).toBeNull()
  })

  it('derives the policy from the request', () => {
    expect(callPolicyOf({})).toEqual({ declared: new Set(), choice: 'auto', single: false })
    const tools = [{ type: 'function' as const, function: { name: 'f' } }]
    expect(
      callPolicyOf({ tools, tool_choice: { type: 'function', function: { name: 'f' } }, parallel_tool_calls: false }),
    ).toEqual({ declared: new Set(['f']), choice: { name: 'f' }, single: true })
  })
})
