import { formatUsdc } from '../money/usdc.js'
import type { UsageRecord } from '../store/usage.js'

/** A usage record as the API, the portal and `svc usage --json` show it. */
export function wireUsage(u: UsageRecord) {
  return {
    object: 'usage.record',
    request_id: u.requestId,
    created: Math.floor(u.createdAt / 1000),
    key_id: u.keyId,
    model: u.model,
    served_model: u.servedModel,
    provider: u.provider,
    stream: u.stream,
    outcome: u.outcome,
    usage: {
      prompt_tokens: u.promptTokens,
      completion_tokens: u.completionTokens,
      total_tokens: u.promptTokens + u.completionTokens,
    },
    upstream_usage:
      u.upstreamPromptTokens === null
        ? null
        : { prompt_tokens: u.upstreamPromptTokens, completion_tokens: u.upstreamCompletionTokens },
    cost_usdc: formatUsdc(u.cost),
    latency_ms: u.latencyMs,
  }
}
