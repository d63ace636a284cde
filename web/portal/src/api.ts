/** The portal's JSON API: the session cookie travels by itself; state changes carry the session's CSRF token. */

export interface ApiErrorBody {
  type: string
  code: string
  message: string
  param: string | null
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiErrorBody,
    readonly requestId: string | null,
  ) {
    super(body.message)
  }
}

let csrf: string | null = null

export function setCsrf(token: string | null): void {
  csrf = token
}

export async function api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf
  const res = await fetch(`/portal/api${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const data = (await res.json().catch(() => null)) as unknown
  if (!res.ok) {
    const err = (data as { error?: ApiErrorBody } | null)?.error ?? {
      type: 'api_error',
      code: 'unknown',
      message: `HTTP ${res.status}`,
      param: null,
    }
    throw new ApiError(res.status, err, res.headers.get('x-request-id'))
  }
  return data as T
}

/** An error as one line for people, with the request id support needs. */
export function describe(err: unknown): string {
  if (err instanceof ApiError) return `${err.message}${err.requestId ? ` (request ${err.requestId})` : ''}`
  return err instanceof Error ? err.message : String(err)
}

export interface Session {
  address: string
  kind: 'user' | 'provider' | 'system'
  provider: boolean
  status: 'active' | 'suspended'
  csrf_token: string
  expires_at: number
}
export interface PortalConfig {
  chain_id: number
  rail: { kind: 'local' } | { kind: 'evm'; chain_id: number; usdc: string; spender: string }
  local_test_wallet: boolean
}
export interface Nonce {
  nonce: string
  domain: string
  uri: string
  chain_id: number
  version: '1'
  statement: string
  expires_at: number
}
export interface ApiKey {
  id: string
  prefix: string
  name: string
  created: number
  last_used: number | null
  revoked: number | null
  /** Requests and tokens a minute the key may use; null: no limit. */
  rpm: number | null
  tpm: number | null
  /** USDC the key may spend in a period (decimal string), when the period starts over; null: no spend limit. */
  spend_limit: string | null
  limit_reset: 'none' | 'daily' | 'weekly' | 'monthly' | null
  /** What the key spent and holds in its current period, and when it resets (epoch s; null: never). */
  this_period: { spent_usdc: string; held_usdc: string; remaining_usdc: string; resets_at: number | null } | null
}
export interface NewKey extends ApiKey {
  api_key: string
}
export interface OnChain {
  chain_id: number
  usdc: string
  approve: string
  onchain_balance: string | null
  allowance: string | null
  owed: string
  read_at_block: string | null
}
export interface Wallet {
  address: string
  kind: string
  status: string
  balance: string
  cap: string
  held: string
  spendable: string
  debt: string
  chain?: OnChain
}
export interface UsageRecord {
  request_id: string
  created: number
  key_id: string
  model: string
  served_model: string | null
  provider: string | null
  stream: boolean
  outcome: string
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
  cost_usdc: string
  latency_ms: number
}
export interface UsagePage {
  data: UsageRecord[]
  has_more: boolean
  last_id: string | null
}
export interface UsageSummary {
  totals: { requests: number; prompt_tokens: number; completion_tokens: number; cost_usdc: string }
  daily: { date: string; requests: number; cost_usdc: string }[]
}
export interface ProviderView {
  address: string
  offers: {
    model: string
    input_price_per_mtok: string
    output_price_per_mtok: string
    max_concurrency: number
    fingerprint: string
    breaker: string
    inflight: number
    verification: OfferVerification
  }[]
  requests_served: number
  charged_usdc: string
  earned_usdc: string
  pending_usdc: string
  settled_usdc: string
  payouts: {
    batch_id: string
    status: string
    amount_usdc: string
    created: number
    settled: number | null
    tx_hash: string | null
  }[]
}

/** What the marketplace's audits found of an offer, and why it is suspect or quarantined. */
export interface OfferVerification {
  state: 'verified' | 'unverified' | 'suspect' | 'quarantined'
  reference: boolean
  audits_1d: { passed: number; failed: number }
  last_failed: { audit_id: string; created: number; reason: string | null; finding: string | null } | null
  held_usdc: string | null
}

export interface EndpointOfferView {
  model: string
  upstream_model: string
  input_price_per_mtok: string
  output_price_per_mtok: string
  max_concurrency: number
  status: 'live' | 'paused' | 'withdrawn'
}
export interface EndpointView {
  id: string
  base_url: string
  bundle: string
  profile: string
  status: 'live' | 'withdrawn'
  created: number
  offers: EndpointOfferView[]
}
