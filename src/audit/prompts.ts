import { readFileSync } from 'node:fs'
import { ConfigError } from '../config.js'

/** One audit prompt: an id (named in the audit's evidence) and the messages sent. */
export interface AuditPrompt {
  id: string
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[]
}

const user = (id: string, content: string): AuditPrompt => ({ id, messages: [{ role: 'user', content }] })

/**
 * The pool audits draw from: short everyday requests, as clients send, so an audit reads like client traffic. The
 * operator adds to it (`audit.prompts`, a JSON file of more).
 */
export const BUILT_IN_PROMPTS: readonly AuditPrompt[] = [
  user('capital-france', 'What is the capital of France? Answer in one sentence.'),
  user('haiku-rain', 'Write a haiku about rain on a tin roof.'),
  user('explain-tcp', 'Explain in two sentences what TCP does.'),
  user('list-primes', 'List the first ten prime numbers.'),
  user('translate-hello', 'Translate "good morning, how are you?" into Spanish and German.'),
  user('sort-words', 'Sort these words alphabetically: pear, apple, mango, kiwi, banana.'),
  user('summary-bridge', 'Summarize in one sentence why suspension bridges sway in the wind.'),
  user('code-reverse', 'Write a Python function that reverses a string.'),
  {
    id: 'support-refund',
    messages: [
      { role: 'system', content: 'You are a polite customer support assistant.' },
      { role: 'user', content: 'My order arrived broken. What should I do?' },
    ],
  },
  user('math-word', 'A train leaves at 3pm and travels 120 km at 80 km/h. When does it arrive?'),
]

const ROLES = new Set(['system', 'user', 'assistant'])

/** The built-in pool and the operator's prompts from `path` (ids must be new); ConfigError when the file is not one. */
export function auditPrompts(path: string | undefined): AuditPrompt[] {
  const pool = [...BUILT_IN_PROMPTS]
  if (!path) return pool
  const fail = (why: string) => new ConfigError([`audit.prompts ${path}: ${why}`], '(audit.prompts)')
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'))
  } catch (err) {
    throw fail((err as NodeJS.ErrnoException).code ?? (err as Error).message)
  }
  if (!Array.isArray(parsed)) throw fail('must be a JSON array of {"id", "messages"}')
  const ids = new Set(pool.map((p) => p.id))
  for (const [i, p] of parsed.entries()) {
    const ok =
      typeof p === 'object' &&
      p !== null &&
      typeof p.id === 'string' &&
      p.id.length > 0 &&
      Array.isArray(p.messages) &&
      p.messages.length > 0 &&
      p.messages.every(
        (m: unknown) =>
          typeof m === 'object' &&
          m !== null &&
          ROLES.has((m as { role?: unknown }).role as string) &&
          typeof (m as { content?: unknown }).content === 'string',
      )
    if (!ok) throw fail(`entry ${i} must be {"id": "…", "messages": [{"role": "user", "content": "…"}, …]}`)
    if (ids.has(p.id)) throw fail(`entry ${i}: the id ${JSON.stringify(p.id)} is taken`)
    ids.add(p.id)
    pool.push({ id: p.id, messages: p.messages })
  }
  return pool
}
