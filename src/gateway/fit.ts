import type { ModelConfig } from '../config-schema.js'
import type { ChatRequest } from '../protocol/chat.js'
import { unsupported, type ApiError } from '../protocol/errors.js'
import { responseFormatViolation, toolContractViolation } from '../tools/contract.js'

/** What a request needs from a model, once metered. */
export interface Needs {
  inputTokens: number
  /** max_tokens (or its alias) as the client sent it, if it did. */
  requestedMax: number | undefined
  maxParam: 'max_tokens' | 'max_completion_tokens'
  stream: boolean
  usesTools: boolean
  /** Whether a message holds an image. */
  usesImages: boolean
}

/** The output bound of a request on a model: what the client asked, else what the model and its context leave. */
export function effectiveMax(model: Pick<ModelConfig, 'contextLimit' | 'capabilities'>, needs: Needs): number {
  return needs.requestedMax ?? Math.min(model.capabilities.maxOutputTokens, model.contextLimit - needs.inputTokens)
}

/** Why this model cannot serve the request, naming the field at fault; null when it fits. */
export function fitViolation(model: ModelConfig, req: ChatRequest, needs: Needs): ApiError | null {
  const caps = model.capabilities
  if (caps.workload !== 'chat')
    return unsupported('model', `${model.id} is an ${caps.workload} model; it does not serve chat completions.`)
  if (needs.stream && !caps.streaming)
    return unsupported('stream', `${model.id} does not support streaming; send stream false.`)
  if (needs.usesImages && !caps.vision)
    return unsupported('messages', `${model.id} does not take images; send text only, or use a model that does.`)
  if (needs.usesTools && !caps.tools)
    return unsupported('messages', `${model.id} does not support tools, and the conversation contains tool calls.`)
  const tools = toolContractViolation(model.id, caps, model.tool_contract, req)
  if (tools) return tools
  const format = responseFormatViolation(model.id, caps, model.tool_contract, req)
  if (format) return format
  if (needs.requestedMax !== undefined && needs.requestedMax > caps.maxOutputTokens) {
    return unsupported(
      needs.maxParam,
      `${needs.maxParam} ${needs.requestedMax} is above the maximum output of ${model.id} (${caps.maxOutputTokens} tokens).`,
    )
  }
  return contextViolation(model, needs)
}

/** Why a target of this context (and maximum output) cannot take the request's prompt and reply; null when it can. */
export function contextViolation(
  model: Pick<ModelConfig, 'id' | 'contextLimit' | 'capabilities'>,
  needs: Needs,
): ApiError | null {
  // The count stops past the largest context of the request's targets (`countInput`): it is then only a lower bound.
  if (needs.inputTokens >= model.contextLimit) {
    return unsupported(
      'messages',
      `The prompt is longer than the context window of ${model.id} (${model.contextLimit} tokens).`,
    )
  }
  const max = effectiveMax(model, needs)
  if (needs.inputTokens + Math.max(max, 1) > model.contextLimit) {
    // Only when the prompt leaves room for a reply can a lower bound help.
    const param =
      needs.requestedMax !== undefined && needs.inputTokens < model.contextLimit ? needs.maxParam : 'messages'
    return unsupported(
      param,
      `The prompt (${needs.inputTokens} tokens) plus ${needs.requestedMax !== undefined ? `${needs.maxParam} ${needs.requestedMax}` : 'a reply'} exceeds the context window of ${model.id} (${model.contextLimit} tokens).`,
    )
  }
  return null
}
