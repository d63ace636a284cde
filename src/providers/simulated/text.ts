/** Deterministic output of the simulated upstream: the same request always gets the same reply. */

const WORDS = [
  'the',
  'river',
  'light',
  'stone',
  'market',
  'north',
  'garden',
  'signal',
  'paper',
  'bridge',
  'cloud',
  'green',
  'quiet',
  'harbor',
  'window',
  'silver',
  'forest',
  'engine',
  'summer',
  'letter',
  'copper',
  'valley',
  'orange',
  'winter',
  'castle',
  'meadow',
  'pocket',
  'rocket',
  'island',
  'thread',
  'candle',
  'anchor',
]

/** FNV-1a, 32 bit. */
export function hash(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** `count` words chosen from the seed; each piece after the first starts with a space (one token each under o200k). */
export function replyWords(seed: string, count: number): string[] {
  let h = hash(seed)
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0
    const w = WORDS[h % WORDS.length]!
    out.push(i === 0 ? w[0]!.toUpperCase() + w.slice(1) : ` ${w}`)
  }
  return out
}

type Schema = Record<string, unknown>

const SAMPLE_STRINGS: Record<string, string> = {
  city: 'Paris',
  location: 'Paris',
  country: 'France',
  unit: 'celsius',
  query: 'weather',
  timezone: 'Europe/Paris',
}

/** A value that satisfies a JSON schema (the subset tool parameters use). */
export function sampleFor(schema: Schema | undefined, name = ''): unknown {
  if (!schema) return {}
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0]
  if ('const' in schema) return schema.const
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case 'string': {
      const min = typeof schema.minLength === 'number' ? schema.minLength : 0
      const base = SAMPLE_STRINGS[name] ?? (name || 'value')
      return min > base.length ? base + 'x'.repeat(min - base.length) : base
    }
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1
    case 'boolean':
      return true
    case 'array': {
      const min = typeof schema.minItems === 'number' ? schema.minItems : 0
      return Array.from({ length: min }, () => sampleFor(schema.items as Schema | undefined))
    }
    case 'null':
      return null
    default: {
      const props = (schema.properties ?? {}) as Record<string, Schema>
      const required = Array.isArray(schema.required) ? (schema.required as string[]) : Object.keys(props)
      const out: Record<string, unknown> = {}
      for (const key of required) out[key] = sampleFor(props[key], key)
      return out
    }
  }
}
