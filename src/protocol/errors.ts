/** The closed set of error codes a client can receive, and the one table that maps each to HTTP. */
export const ERROR_TABLE = {
  feature_not_supported: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  account_suspended: { status: 403, type: 'permission_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  insufficient_quota: { status: 402, type: 'insufficient_quota' },
  // A key's own limits of requests or tokens a minute (svc key create --rpm/--tpm): OpenAI's code and status.
  rate_limit_exceeded: { status: 429, type: 'requests' },
  provider_output_invalid: { status: 502, type: 'api_error' },
  no_capacity: { status: 503, type: 'api_error' },
  stream_interrupted: { status: 502, type: 'api_error' },
  // The account portal's API only (never on /v1): no live session; a refused sign-in; a state change without its CSRF
  // token.
  session_required: { status: 401, type: 'authentication_error' },
  sign_in_failed: { status: 401, type: 'authentication_error' },
  csrf_failed: { status: 403, type: 'permission_error' },
} as const

export type ErrorCode = keyof typeof ERROR_TABLE

/** An error as data: what went wrong for the client, never a thrown exception on the request path. */
export interface ApiError {
  code: ErrorCode
  message: string
  /** Offending request field, e.g. `tool_choice` or `messages[2].role`. */
  param?: string | null
  /** Seconds, for codes that carry Retry-After. */
  retryAfter?: number
  /** Overrides the table's status (413 for an oversized body, 404 for an unknown path). */
  status?: number
}

export interface ErrorBody {
  error: { type: string; code: ErrorCode; param: string | null; message: string }
}

/**
 * Client or upstream text as an error message may repeat it, cut after `max` characters (64: an id or a name; a
 * message, which is prose, is given more): a hostile one can be as long as a body or an event.
 */
export function clipped(text: string, max = 64): string {
  return text.length > max ? `${cutAt(text, max)}…` : text
}

/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair. */
export function cutAt(text: string, max: number): string {
  if (text.length <= max) return text
  const last = text.charCodeAt(max - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

export function apiError(code: ErrorCode, message: string, extra: Omit<ApiError, 'code' | 'message'> = {}): ApiError {
  return { code, message, ...extra }
}

/** 400 feature_not_supported naming the request field at fault: the refusal of most client input. */
export function unsupported(param: string, message: string): ApiError {
  return apiError('feature_not_supported', message, { param })
}

/** Distinguishes an ApiError from the value a check returns when it passes. */
export function isApiError(v: unknown): v is ApiError {
  return (
    typeof v === 'object' &&
    v !== null &&
    'code' in v &&
    'message' in v &&
    typeof (v as ApiError).code === 'string' &&
    (v as ApiError).code in ERROR_TABLE
  )
}

export function statusOf(err: ApiError): number {
  return err.status ?? ERROR_TABLE[err.code].status
}

/** In the key order of docs/interface-examples.md, where "field names, order and types are the contract". */
export function errorBody(err: ApiError): ErrorBody {
  return { error: { type: ERROR_TABLE[err.code].type, code: err.code, param: err.param ?? null, message: err.message } }
}
