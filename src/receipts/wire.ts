import type { ReceiptRecord } from '../store/receipts.js'
import { receiptId, type WireReceipt } from './typed-data.js'

/** A receipt record as the API serves it and its signature covers. */
export function wireReceipt(r: ReceiptRecord): WireReceipt {
  return {
    object: 'usage.receipt',
    receipt_id: receiptId(r.requestId),
    request_id: r.requestId,
    key_id: r.keyId,
    payer: r.payer,
    model: r.model,
    served_model: r.servedModel,
    provider: r.provider,
    body_sha256: r.bodySha256,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    upstream_prompt_tokens: r.upstreamPromptTokens,
    upstream_completion_tokens: r.upstreamCompletionTokens,
    input_price_per_mtok: r.inputPrice.toString(),
    output_price_per_mtok: r.outputPrice.toString(),
    cost: r.cost.toString(),
    fee: r.fee.toString(),
    outcome: r.outcome,
    created_at: r.createdAt,
  }
}
