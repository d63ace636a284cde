import type { ChatRequest } from '../protocol/chat.js'
import { apiError, clipped, isApiError, type ApiError } from '../protocol/errors.js'
import { CORTEX_MODEL_ID } from '../protocol/models.js'
import { countInput } from '../metering/tokens.js'
import type { Catalog, CortexModel } from '../routing/catalog.js'
import type { ModelConfig } from '../config-schema.js'
import type { Health } from '../routing/health.js'
import { planCortex, planNamed, type Candidate, type RoutePlan } from '../routing/route.js'
import { preferencesOf, refusedByPreferences, type Preferences } from '../routing/preferences.js'
import type { UpstreamRequest } from '../providers/types.js'
import type { StateOf } from '../routing/verification.js'
import type { Verified } from '../routing/plan.js'
import { contextViolation, effectiveMax, fitViolation, type Needs } from './fit.js'
import { knownFormat, normalizeMessages, upstreamBodyJson, type NormalizedMessages } from './normalize.js'
import { validateChatRequest } from './validate.js'
import { callPolicyOf, type CallPolicy } from '../tools/assemble.js'
import { toolRequestViolation } from '../tools/contract.js'

/** A request that passed every check before money: validated, metered, bounded and planned. */
export interface Prepared {
  request: ChatRequest
  model: string
  stream: boolean
  inputTokens: number
  /**
   * The largest output bound of the plan's targets: what the hold covers (each target is told, and billed up to, its
   * own).
   */
  maxTokens: number
  /** What the reply may call: declared tools, tool_choice, parallel_tool_calls. */
  calls: CallPolicy
  /** The targets, each with the upstream request it is sent. */
  plan: RoutePlan
}

/**
 * Validates, meters and plans a chat request (docs/interface.md §4.1, docs/architecture.md §3, §5); bad input yields an
 * ApiError, never an exception. A long prompt is counted over several event-loop turns (`countInput`): the outcome is
 * then a promise, which rejects with `CountAbandoned` once `abandoned` says no one waits for it any more. An `audit`
 * (the marketplace's own, pinned to one offer) is routed whatever the audits found of that offer.
 */
export function prepare(
  body: unknown,
  catalog: Catalog,
  health: Health,
  { abandoned, audit = false }: { abandoned?: () => boolean; audit?: boolean } = {},
): Prepared | ApiError | Promise<Prepared | ApiError> {
  const request = validateChatRequest(body)
  if (isApiError(request)) return request
  if (request.n !== undefined && request.n !== null && request.n > 1) {
    return apiError('feature_not_supported', 'n greater than 1 is not supported; send one request per choice.', {
      param: 'n',
    })
  }
  const named = catalog.models.get(request.model)
  const cortex = catalog.isCortex(request.model) ? catalog.cortex : undefined
  if (!named && !cortex) {
    return apiError(
      'model_not_found',
      `The model ${JSON.stringify(clipped(request.model))} does not exist. GET /v1/models lists the models, including ${CORTEX_MODEL_ID}.`,
      { param: 'model' },
    )
  }
  const prefs = preferencesOf(request.provider)
  if (isApiError(prefs)) return prefs
  // One function for every request, audits included (they are told apart by `audit`): the routing's call sites stay
  // monomorphic.
  const stateOf: StateOf = catalog.stateOf
  const excluded = refusedByPreferences(
    catalog,
    { model: request.model, ids: named ? [named.id] : cortex!.candidates, vendor: !named },
    prefs,
    stateOf,
  )
  if (excluded) return excluded
  const messages = normalizeMessages(request.messages)
  if (isApiError(messages)) return messages
  // Malformed tool options are the request's fault on any model: refused here, never routed around by cortex.
  const tooling = toolRequestViolation(request)
  if (tooling) return tooling
  // Tool definitions and a response schema reach the model as input: they count, as their JSON.
  const schema =
    request.response_format?.type === 'json_schema'
      ? JSON.stringify(knownFormat(request.response_format).json_schema)
      : ''
  const toolsJson = request.tools?.length ? JSON.stringify(request.tools) : undefined
  const read: Read = { request, messages, toolsJson, named, cortex, prefs, stateOf, audit }
  const inputTokens = countInput(
    messages.metered,
    (toolsJson ?? '') + schema,
    largestContext(catalog, named, cortex),
    // In the model's own tokenizer; svc/cortex@1's estimate in o200k (its targets' tokenizers may differ).
    { abandoned, counter: named ? catalog.counters.get(named.id) : undefined },
  )
  // Images count as input by their own rule (metering/images.ts), beside the text.
  const images = messages.imageTokens
  if (typeof inputTokens === 'number') return planned(read, inputTokens + images, catalog, health)
  // Planned after the count, with the breakers' state of then.
  return inputTokens.then((n) => planned(read, n + images, catalog, health))
}

/** A request read and checked, before its plan. */
interface Read {
  request: ChatRequest
  messages: NormalizedMessages
  toolsJson: string | undefined
  named: ModelConfig | undefined
  cortex: CortexModel | undefined
  prefs: Preferences | undefined
  stateOf: StateOf
  audit: boolean
}

/** Bounds and plans a checked request of `inputTokens`, or refuses it as unfit for its model. */
function planned(
  { request, messages, toolsJson, named, cortex, prefs, stateOf, audit }: Read,
  inputTokens: number,
  catalog: Catalog,
  health: Health,
): Prepared | ApiError {
  const needs: Needs = {
    inputTokens,
    requestedMax: request.max_completion_tokens ?? request.max_tokens ?? undefined,
    maxParam: request.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens',
    stream: request.stream === true,
    usesTools: messages.usesTools,
    usesImages: messages.images > 0,
  }
  let maxTokens: number
  let plan: RoutePlan
  if (named) {
    const unfit = fitViolation(named, request, needs)
    if (unfit) return unfit
    maxTokens = effectiveMax(named, needs)
    const upstream = {
      bodyJson: upstreamBodyJson(request, messages.upstream, toolsJson),
      stream: needs.stream,
      maxTokens,
    }
    const verified = { stateOf, prefer: false, audit }
    plan = planNamed({ catalog, health, inputTokens, model: named, request: upstream, prefs, verified })
  } else {
    const body = { bodyJson: upstreamBodyJson(request, messages.upstream, toolsJson), stream: needs.stream }
    const verified = { stateOf, prefer: true, audit }
    const planned = cortexPlan({ catalog, health, cortex: cortex!, request, needs, body, prefs, verified })
    if (isApiError(planned)) return planned
    ;({ plan, maxTokens } = planned)
  }
  return {
    request,
    model: request.model,
    stream: needs.stream,
    inputTokens,
    maxTokens,
    calls: callPolicyOf(request),
    plan,
  }
}

/**
 * The most input tokens any target of the request could take: counting past it only finds the prompt too long. With
 * cortex's vendor and no `managed.contextLimit` in the config there is no such bound, and the prompt is counted whole.
 */
function largestContext(catalog: Catalog, named: ModelConfig | undefined, cortex: CortexModel | undefined): number {
  if (named) return named.contextLimit
  const candidates = Math.max(...cortex!.candidates.map((id) => catalog.models.get(id)!.contextLimit))
  return catalog.managed ? Math.max(catalog.managedContext, candidates) : candidates
}

/**
 * Plans svc/cortex@1 (docs/architecture.md §4, §5): each candidate is sent its own reply bound; those that can give the
 * whole bound come first, in preference order, then the others, then the vendor. The hold covers the largest bound;
 * when nothing fits, the request is refused (a 400, not a 503). Why: docs/architecture.md §15.21.
 */
function cortexPlan({
  catalog,
  health,
  cortex,
  request,
  needs,
  body,
  prefs,
  verified,
}: {
  catalog: Catalog
  health: Health
  cortex: CortexModel
  request: ChatRequest
  needs: Needs
  body: UpstreamRequest
  prefs: Preferences | undefined
  verified: Verified
}): { plan: RoutePlan; maxTokens: number } | ApiError {
  const listed = { ...body, maxTokens: needs.requestedMax ?? cortex.capabilities.maxOutputTokens }
  const vendorModel = {
    id: `the managed vendor of ${CORTEX_MODEL_ID}`,
    contextLimit: catalog.managedContext,
    capabilities: cortex.capabilities,
  }
  const vendorUnfit = catalog.managed ? contextViolation(vendorModel, needs) : null
  const vendorMax = Math.min(listed.maxTokens, effectiveMax(vendorModel, needs))
  const vendor =
    catalog.managed && !vendorUnfit
      ? vendorMax === listed.maxTokens
        ? listed
        : { ...body, maxTokens: vendorMax }
      : undefined
  let maxTokens = vendor?.maxTokens ?? 0
  const whole: Candidate[] = []
  const short: Candidate[] = []
  let unfit: ApiError | undefined
  for (const id of cortex.candidates) {
    const model = catalog.models.get(id)!
    const violation = fitViolation(model, request, needs)
    unfit ??= violation ?? undefined
    if (violation !== null) continue
    const bound = Math.min(listed.maxTokens, effectiveMax(model, needs))
    // With max_tokens sent every bound is the same: one request serves the whole plan, as for a named model.
    if (bound === listed.maxTokens) whole.push({ model, request: listed })
    else short.push({ model, request: { ...body, maxTokens: bound } })
    maxTokens = Math.max(maxTokens, bound)
  }
  if (whole.length === 0 && short.length === 0 && !vendor) return vendorUnfit ?? unfit!
  return {
    plan: planCortex({
      catalog,
      health,
      inputTokens: needs.inputTokens,
      fitting: [...whole, ...short],
      vendor,
      prefs,
      verified,
    }),
    maxTokens,
  }
}
