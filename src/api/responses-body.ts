import { receiptId } from '../receipts/typed-data.js'
import type { Delivered } from '../gateway/charge.js'
import type { Admitted } from '../gateway/context.js'
import { outputItems, responseUsage, statusOf } from '../gateway/responses/output.js'
import {
  responseId,
  type FailedSvc,
  type OutputItem,
  type ResponseEcho,
  type ResponseObject,
  type ResponseStatus,
} from '../protocol/responses.js'
import { formatUsdc } from '../money/usdc.js'
import { svcOf } from './reply-svc.js'

/** What every state of one response shares: its identity and what it echoes of its request. */
export interface ResponseFrame {
  id: string
  created_at: number
  model: string
  echo: ResponseEcho
}

export function frameOf(r: Admitted, echo: ResponseEcho): ResponseFrame {
  return { id: responseId(r.requestId), created_at: Math.floor(r.startedAt / 1000), model: r.prepared.model, echo }
}

/** The response object in one of its states; `rest` says what that state has (output, usage, error, svc). */
export function responseObject(
  frame: ResponseFrame,
  status: ResponseStatus,
  rest: Partial<Pick<ResponseObject, 'output' | 'usage' | 'error' | 'incomplete_details' | 'svc'>> = {},
): ResponseObject {
  const { echo } = frame
  return {
    id: frame.id,
    object: 'response',
    created_at: frame.created_at,
    status,
    error: rest.error ?? null,
    incomplete_details: rest.incomplete_details ?? null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    model: frame.model,
    output: rest.output ?? [],
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: echo.previous_response_id,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_p: echo.top_p,
    metadata: echo.metadata,
    store: echo.store,
    usage: rest.usage ?? null,
    ...(rest.svc ? { svc: rest.svc } : {}),
  }
}

/** The response of a delivered request: its output, usage and svc object. */
export function deliveredResponse(
  frame: ResponseFrame,
  r: Admitted,
  f: Delivered,
  output?: OutputItem[],
): ResponseObject {
  const { status, incomplete_details } = statusOf(f.reply)
  return responseObject(frame, status, {
    incomplete_details,
    output: output ?? outputItems(r.requestId, f.reply),
    usage: responseUsage(f.usage),
    svc: svcOf(r, f),
  })
}

/** The svc object of a failed response: nothing charged; who had begun to answer, when one had. */
export function failedSvc(requestId: string, provider?: string): FailedSvc {
  return {
    cost_usdc: formatUsdc(0n),
    request_id: requestId,
    receipt_id: receiptId(requestId),
    ...(provider !== undefined ? { provider } : {}),
  }
}
