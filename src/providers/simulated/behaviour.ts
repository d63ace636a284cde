import type { ToolChoiceMode } from '../../protocol/models.js'

/**
 * What a simulated model can do with tools, per upstream model name. The defaults do everything; a narrower
 * behaviour imitates the upstreams `svc certify` must tell apart (servers refusing tool_choice values or
 * strict schemas, models that cannot call in parallel, cut long arguments, loop in agents, or shed load).
 */
export interface ModelBehaviour {
  /** tool_choice values honoured. */
  toolChoice: ToolChoiceMode[]
  /**
   * What it does with another tool_choice: refuse it with 400 (as some servers do) or ignore it, acting on auto (as
   * others do).
   */
  toolChoiceUnsupported: 'refuse' | 'ignore'
  /** Whether it calls several tools in one turn; when false it calls only the first it picks. */
  parallel: boolean
  /** Whether it accepts strict schemas (tools[].function.strict, a strict json_schema); when false, 400. */
  strict: boolean
  /** Longest argument document it writes intact; longer ones come out cut, not valid JSON (0: no limit). */
  maxArgumentBytes: number
  /** Requests of this model it serves at once; more are refused with 429 (0: no limit). */
  maxConcurrency: number
  /** Whether it answers a tool result with text; when false it calls a tool again, so an agent loop never ends. */
  agentic: boolean
  /** Pause before answering, in ms. */
  latencyMs: number
}

export const FULL_BEHAVIOUR: ModelBehaviour = {
  toolChoice: ['auto', 'none', 'required', 'named'],
  toolChoiceUnsupported: 'refuse',
  parallel: true,
  strict: true,
  maxArgumentBytes: 0,
  maxConcurrency: 0,
  agentic: true,
  latencyMs: 0,
}

export type Behaviours = Record<string, Partial<ModelBehaviour>>

const TOOL_CHOICES: readonly ToolChoiceMode[] = ['auto', 'none', 'required', 'named']
const isWhole = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0

/** What each field of a behaviour must be, as a check and its words. */
const FIELD_RULES: { [K in keyof ModelBehaviour]: [(v: unknown) => boolean, string] } = {
  toolChoice: [
    (v) => Array.isArray(v) && v.every((m) => TOOL_CHOICES.includes(m)),
    `an array of ${TOOL_CHOICES.map((m) => JSON.stringify(m)).join(', ')}`,
  ],
  toolChoiceUnsupported: [(v) => v === 'refuse' || v === 'ignore', '"refuse" or "ignore"'],
  parallel: [(v) => typeof v === 'boolean', 'true or false'],
  strict: [(v) => typeof v === 'boolean', 'true or false'],
  maxArgumentBytes: [isWhole, 'a whole number (0: no limit)'],
  maxConcurrency: [isWhole, 'a whole number (0: no limit)'],
  agentic: [(v) => typeof v === 'boolean', 'true or false'],
  latencyMs: [isWhole, 'a whole number of ms'],
}

/** Why `models` is not a set of behaviours by upstream model (unknown fields, values of the wrong kind), or null. */
export function behavioursProblem(models: unknown): string | null {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
  if (!isObject(models)) return 'must be a JSON object of behaviours by upstream model'
  for (const [model, b] of Object.entries(models)) {
    if (!isObject(b)) return `${model} must be an object`
    const unknown = Object.keys(b).filter((k) => !Object.hasOwn(FULL_BEHAVIOUR, k))
    if (unknown.length)
      return `${model} has no field ${unknown.join(', ')} (fields: ${Object.keys(FULL_BEHAVIOUR).join(', ')})`
    for (const [field, [ok, words]] of Object.entries(FIELD_RULES)) {
      if (Object.hasOwn(b, field) && !ok(b[field]))
        return `${model}.${field} must be ${words}, got ${JSON.stringify(b[field])}`
    }
  }
  return null
}

/** A model's behaviour: its own fields over the engine's (`engine`, what the server imposes) over the defaults. */
export function behaviourOf(models: Behaviours, model: string, engine: Partial<ModelBehaviour> = {}): ModelBehaviour {
  const own = Object.hasOwn(models, model) ? models[model] : undefined
  return own || Object.keys(engine).length ? { ...FULL_BEHAVIOUR, ...engine, ...own } : FULL_BEHAVIOUR
}

function unsupportedChoice(body: Record<string, unknown>, b: ModelBehaviour): string | null {
  const choice = body.tool_choice
  if (choice === undefined) return null
  const mode = (typeof choice === 'string' ? choice : 'named') as ToolChoiceMode
  return b.toolChoice.includes(mode) ? null : mode
}

/** Why this model refuses the request outright (a 400 message), or null. */
export function refusalOf(body: Record<string, unknown>, b: ModelBehaviour): string | null {
  const mode = unsupportedChoice(body, b)
  if (mode && b.toolChoiceUnsupported === 'refuse')
    return `tool_choice ${JSON.stringify(mode)} is not supported by this server`
  if (!b.strict) {
    const tools = Array.isArray(body.tools) ? (body.tools as { function?: { strict?: unknown } }[]) : []
    if (tools.some((t) => t.function?.strict === true))
      return 'strict function schemas are not supported by this server'
    const format = body.response_format as { type?: string; json_schema?: { strict?: unknown } } | undefined
    if (format?.type === 'json_schema' && format.json_schema?.strict === true)
      return 'strict json_schema is not supported by this server'
  }
  return null
}

/** The request as the model acts on it: an unsupported tool_choice it ignores is gone. */
export function actedOn(body: Record<string, unknown>, b: ModelBehaviour): Record<string, unknown> {
  if (!unsupportedChoice(body, b)) return body
  const { tool_choice: _ignored, ...rest } = body
  return rest
}

/** Cuts argument documents past the model's limit, the way a model that runs out of steam does. */
export function cutLongArguments(calls: { arguments: string }[], b: ModelBehaviour): void {
  if (b.maxArgumentBytes <= 0) return
  for (const c of calls)
    if (Buffer.byteLength(c.arguments) > b.maxArgumentBytes) c.arguments = c.arguments.slice(0, b.maxArgumentBytes >> 1)
}
