import type { ChatRequest } from '../protocol/chat.js'
import type { Capabilities, ToolChoiceMode, ToolContract } from '../protocol/models.js'
import { clipped, unsupported, type ApiError } from '../protocol/errors.js'

function choiceMode(choice: ChatRequest['tool_choice']): ToolChoiceMode | undefined {
  if (choice === undefined) return undefined
  return typeof choice === 'string' ? choice : 'named'
}

/**
 * A tool_choice as an error message shows it: of its known fields, the name clipped (a client's can be as long as the
 * body).
 */
function shownChoice(choice: NonNullable<ChatRequest['tool_choice']>): string {
  return JSON.stringify(
    typeof choice === 'string' ? choice : { type: choice.type, function: { name: clipped(choice.function.name) } },
  )
}

function listModes(modes: readonly string[]): string {
  if (modes.length === 0) return 'no tool_choice value'
  if (modes.length === 1) return modes[0]!
  return `${modes.slice(0, -1).join(', ')} and ${modes.at(-1)}`
}

/**
 * Refuses tool options that no model could serve, whatever its contract: a tool_choice or parallel_tool_calls without
 * tools, a named tool_choice naming no declared tool, a tool name declared twice. Checked before any model is chosen,
 * so svc/cortex@1 refuses them as a named model does instead of routing them to a model they do not fit.
 */
export function toolRequestViolation(req: ChatRequest): ApiError | null {
  const tools = req.tools ?? []
  const mode = choiceMode(req.tool_choice)
  if (tools.length === 0) {
    if (mode !== undefined && mode !== 'none')
      return unsupported(
        'tool_choice',
        `tool_choice ${shownChoice(req.tool_choice!)} needs tools; the request declares none.`,
      )
    if (req.parallel_tool_calls === true)
      return unsupported('parallel_tool_calls', 'parallel_tool_calls needs tools; the request declares none.')
    return null
  }
  if (mode === 'named') {
    const name = (req.tool_choice as { function: { name: string } }).function.name
    if (!tools.some((t) => t.function.name === name))
      return unsupported(
        'tool_choice',
        `tool_choice names ${JSON.stringify(clipped(name))}, which is not among the declared tools.`,
      )
  }
  const names = new Set<string>()
  for (const [i, t] of tools.entries()) {
    if (names.has(t.function.name))
      return unsupported(`tools[${i}].function.name`, `tool name ${JSON.stringify(t.function.name)} is declared twice.`)
    names.add(t.function.name)
  }
  return null
}

/**
 * Refuses tool options outside the model's certified tool_contract (docs/interface.md §7), naming the field, before any
 * work. Returns null when the request fits. The request's own consistency is `toolRequestViolation`'s, checked before.
 */
export function toolContractViolation(
  modelId: string,
  caps: Capabilities,
  contract: ToolContract | undefined,
  req: ChatRequest,
): ApiError | null {
  const tools = req.tools ?? []
  if (tools.length === 0) return null
  if (!caps.tools || !contract) return unsupported('tools', `${modelId} does not support tools.`)
  const mode = choiceMode(req.tool_choice)
  const effective = mode ?? 'auto'
  if (!contract.tool_choice.includes(effective)) {
    const shown = mode === undefined ? 'the default "auto"' : `"${effective}"`
    return unsupported(
      'tool_choice',
      `${modelId} is certified for tool_choice ${listModes(contract.tool_choice)}; ${shown} is outside its tool_contract.`,
    )
  }
  if (req.parallel_tool_calls === true && !contract.parallel_tool_calls) {
    return unsupported(
      'parallel_tool_calls',
      `${modelId} is not certified for parallel tool calls; send parallel_tool_calls false or leave it out.`,
    )
  }
  for (const [i, t] of tools.entries()) {
    if (t.function.strict === true && !contract.strict_schemas) {
      return unsupported(`tools[${i}].function.strict`, `${modelId} is not certified for strict tool schemas.`)
    }
  }
  return null
}

/** Refuses response_format modes the model cannot honour. */
export function responseFormatViolation(
  modelId: string,
  caps: Capabilities,
  contract: ToolContract | undefined,
  req: ChatRequest,
): ApiError | null {
  const format = req.response_format
  if (!format || format.type === 'text') return null
  if (!caps.structuredOutputs) {
    return unsupported(
      'response_format',
      `${modelId} does not support structured outputs (response_format ${format.type}).`,
    )
  }
  if (format.type === 'json_schema' && format.json_schema.strict === true && contract && !contract.strict_schemas) {
    return unsupported('response_format', `${modelId} is not certified for strict schemas.`)
  }
  return null
}
