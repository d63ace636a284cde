/**
 * Checks a value against the JSON Schema subset that strict tool schemas and json_schema response formats use
 * (type, enum, const, properties, required, additionalProperties, items, string and number bounds).
 * Returns the first mismatch as "<path>: <why>", or null when the value conforms.
 */
export function schemaMismatch(schema: unknown, value: unknown, path = '$'): string | null {
  if (typeof schema !== 'object' || schema === null) return null
  const s = schema as Record<string, unknown>
  if (Array.isArray(s.enum) && !s.enum.some((e) => same(e, value))) return `${path}: not one of the enum values`
  if ('const' in s && !same(s.const, value)) return `${path}: not the const value`
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? (s.type as string[]) : [String(s.type)]
  if (types.length && !types.some((t) => isType(t, value))) return `${path}: expected ${types.join(' or ')}`
  if (typeof value === 'string') {
    if (typeof s.minLength === 'number' && value.length < s.minLength) return `${path}: shorter than ${s.minLength}`
    if (typeof s.maxLength === 'number' && value.length > s.maxLength) return `${path}: longer than ${s.maxLength}`
  }
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum) return `${path}: below ${s.minimum}`
    if (typeof s.maximum === 'number' && value > s.maximum) return `${path}: above ${s.maximum}`
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems) return `${path}: fewer than ${s.minItems} items`
    for (const [i, item] of value.entries()) {
      const why = schemaMismatch(s.items, item, `${path}[${i}]`)
      if (why) return why
    }
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>
    const props = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
      string,
      unknown
    >
    for (const key of Array.isArray(s.required) ? (s.required as string[]) : []) {
      if (!Object.hasOwn(obj, key)) return `${path}: missing required ${key}`
    }
    for (const [key, v] of Object.entries(obj)) {
      if (Object.hasOwn(props, key)) {
        const why = schemaMismatch(props[key], v, `${path}.${key}`)
        if (why) return why
      } else if (s.additionalProperties === false) return `${path}: unexpected property ${key}`
    }
  }
  return null
}

function isType(t: string, v: unknown): boolean {
  switch (t) {
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v)
    case 'array':
      return Array.isArray(v)
    case 'string':
      return typeof v === 'string'
    case 'integer':
      return Number.isInteger(v)
    case 'number':
      return typeof v === 'number' && Number.isFinite(v)
    case 'boolean':
      return typeof v === 'boolean'
    case 'null':
      return v === null
    default:
      return true
  }
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}
