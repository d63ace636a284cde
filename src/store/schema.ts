import type { Generated } from 'kysely'
import type { LimitReset } from '../limits/limits.js'

import type { BatchesTable, BatchLegsTable, BatchReceiptsTable, ChainWalletsTable } from './schema-settlement.js'

export type * from './schema-settlement.js'

/** Table types of the store. Amounts are bigint base units; times are epoch milliseconds. */
export interface AccountsTable {
  id: Generated<number>
  /**
   * EIP-55 wallet address, `svc:<name>` for the marketplace's own accounts, or `x402:<wallet>` for the prepaid account
   * of a wallet that paid with x402.
   */
  address: string
  /** `prepaid`: USDC a wallet paid the settlement contract in advance (x402), spent by its requests (no cap). */
  kind: 'user' | 'provider' | 'system' | 'prepaid'
  status: 'active' | 'suspended'
  /** Cached: deposits − captures (books available + held). */
  balance: bigint
  /** Cached: open holds (book held). */
  held: bigint
  /** Remaining approved spending cap (mirrors an ERC-20 allowance); not money, so no postings. */
  cap: bigint
  /** Charges a rail could not collect; admission refuses while it is non-zero. */
  debt: bigint
  created_at: bigint
}

export interface ApiKeysTable {
  id: string
  account_id: number
  hash: string
  prefix: string
  name: string
  created_at: bigint
  last_used_at: bigint | null
  revoked_at: bigint | null
  /** Requests a minute the key may make; null: no limit. */
  rpm: number | null
  /** Tokens a minute (a request's maximum at admission, its count once it ends); null: no limit. */
  tpm: number | null
  /** What the key may spend in a period, in base units; null: no limit. */
  spend_limit: bigint | null
  limit_reset: Generated<LimitReset>
  /** The start of the period `period_spent` counts (epoch ms; 0 for a limit that never resets). */
  period_start: Generated<bigint>
  /** What the key's requests closed in the period were charged (counted for a key with a spend limit). */
  period_spent: Generated<bigint>
  /** What the key's open holds hold, whatever period they began in (counted for a key with a spend limit). */
  period_held: Generated<bigint>
}

export type { LimitReset } from '../limits/limits.js'

/** A gateway instance's open holds of a key with a spend limit (as `owner_holds` for its account). */
export interface KeyHoldsTable {
  owner: string
  key_id: string
  held: bigint
}

/** A rate-limited key's counts in one minute, where the config names no Redis. */
export interface KeyRatesTable {
  key_id: string
  minute: bigint
  requests: number
  tokens: bigint
}

export type Book = 'available' | 'held' | 'pending'
/** `chain`: the difference between a wallet's on-chain state and the ledger, against svc:world (evm rail). */
export type PostingKind =
  | 'deposit'
  | 'hold'
  | 'release'
  | 'capture'
  | 'payout'
  | 'fee'
  | 'settlement'
  | 'withdrawal'
  | 'chain'
  | 'refund'
  | 'x402'
  | 'x402_refund'

/** Append-only: rows are inserted, never updated or deleted. */
export interface PostingsTable {
  id: Generated<number>
  ref: string
  account_id: number
  book: Book
  kind: PostingKind
  amount: bigint
  created_at: bigint
}

/** The `postings` view (read only): a posting derived from a request's row has no id of its own. */
export interface PostingsView extends Omit<PostingsTable, 'id'> {
  id: number | null
}

/** `open`: a hold of an older version, still a row. `refused`: a request that moved no money. */
export type HoldStatus = 'open' | 'captured' | 'released' | 'refused'

/**
 * The record of one request, written once when it closes (docs/ledger-written-once.md): its hold, then its capture or
 * release, with its usage; or, `refused`, the usage of a request refused before admission (amount 0). Read as
 * `usage` through a view.
 */
export interface HoldsTable {
  request_id: string
  account_id: number
  key_id: string
  model: string
  amount: bigint
  status: HoldStatus
  owner: string
  created_at: bigint
  expires_at: bigint
  closed_at: bigint | null
  cost: bigint | null
  payee_id: number | null
  fee: bigint | null
  batch_id: string | null
  served_model: string | null
  provider: string | null
  stream: number | null
  prompt_tokens: number | null
  completion_tokens: number | null
  upstream_prompt_tokens: number | null
  upstream_completion_tokens: number | null
  outcome: string | null
  latency_ms: number | null
  /** 1: the row stands for the request's postings (the `postings` view derives them). */
  posted: number
  /** The account its fee went to, when it had one. */
  fee_account_id: number | null
  /** SHA-256 (hex) of the request body as received; null on rows written before receipts. */
  body_sha256: string | null
  /** Prices per million tokens of the offer that served it; null when none did. */
  input_price: bigint | null
  output_price: bigint | null
}

/**
 * A gateway instance's open holds on one account: their total and count. The holds themselves live in that
 * instance's memory until they close. `dead`: released by a sweep that took the instance for dead; never held again.
 */
export interface OwnerHoldsTable {
  owner: string
  account_id: number
  held: bigint
  open: number
  dead: number
}

/** A view over the closed rows of `holds` (read only). */
export interface UsageTable {
  request_id: string
  account_id: number
  key_id: string
  model: string
  served_model: string | null
  provider: string | null
  stream: number
  prompt_tokens: number
  completion_tokens: number
  upstream_prompt_tokens: number | null
  upstream_completion_tokens: number | null
  cost: bigint
  outcome: string
  latency_ms: number
  created_at: bigint
}

export interface InstancesTable {
  id: string
  host: string
  pid: number
  started_at: bigint
  heartbeat_at: bigint
}

/** A sign-in nonce: issued by the portal, deleted when used or expired. */
export interface PortalNoncesTable {
  nonce: string
  created_at: bigint
  expires_at: bigint
}

/** A portal session; `id` is the SHA-256 of the cookie's secret, so the table alone cannot sign anyone in. */
export interface PortalSessionsTable {
  id: string
  account_id: number
  address: string
  csrf: string
  created_at: bigint
  expires_at: bigint
}

export interface Database {
  accounts: AccountsTable
  api_keys: ApiKeysTable
  /** A view (migration 010): the rows of `posting_rows` and the postings each posted request row stands for. */
  postings: PostingsView
  posting_rows: PostingsTable
  holds: HoldsTable
  owner_holds: OwnerHoldsTable
  usage: UsageTable
  batches: BatchesTable
  batch_legs: BatchLegsTable
  batch_receipts: BatchReceiptsTable
  instances: InstancesTable
  portal_nonces: PortalNoncesTable
  portal_sessions: PortalSessionsTable
  chain_wallets: ChainWalletsTable
  idempotency: IdempotencyTable
  refusal_counts: RefusalCountsTable
  key_rates: KeyRatesTable
  key_holds: KeyHoldsTable
  provider_endpoints: ProviderEndpointsTable
  provider_offers: ProviderOffersTable
  requests_in_flight: RequestsInFlightTable
  kept_responses: KeptResponsesTable
  audits: AuditsTable
  audit_references: AuditReferencesTable
  offer_states: OfferStatesTable
  held_earnings: HeldEarningsTable
  forfeited_charges: ForfeitedChargesTable
  x402_payments: X402PaymentsTable
}

/**
 * `claimed` before its transfer is sent; `credited` once mined (the payer's prepaid account holds it); `settled` once
 * its request's admission is over (held or refused: what it leaves is the account's to refund); `failed` when the
 * transfer did not happen.
 */
export type X402PaymentStatus = 'claimed' | 'credited' | 'settled' | 'failed'

/** One x402 payment: an EIP-3009 authorization, claimed once by its payer and nonce. */
export interface X402PaymentsTable {
  payer: string
  nonce: string
  request_id: string
  amount: bigint
  /** Seconds since the epoch, as signed. */
  valid_before: bigint
  status: X402PaymentStatus
  account_id: number | null
  tx_hash: string | null
  note: string | null
  created_at: bigint
  updated_at: bigint
}

/** An offer's earnings held back from settlement: `held`, then `released` or `forfeited` by an operator. */
export interface HeldEarningsTable {
  id: string
  provider: string
  model: string
  /** Charges of requests that began at or after this (its last passed audit) are held. */
  from_at: bigint
  /** Requests that began from this (the offer left quarantine) are not held; null while it is quarantined. */
  to_at: bigint | null
  status: string
  /** The audit that quarantined it. */
  audit_id: string
  created_at: bigint
  decided_at: bigint | null
  note: string | null
  refunded: bigint | null
  refunded_charges: number | null
}

/** A charge forfeited by a decision: refunded to its payer, never settled. */
export interface ForfeitedChargesTable {
  request_id: string
  held_id: string
  amount: bigint
}

/** One audit of an offer: its result (`passed`, `failed`, `inconclusive`), why it failed, and its evidence (JSON). */
export interface AuditsTable {
  id: string
  model: string
  provider: string
  offer_signature: string
  prompt_id: string
  result: string
  reason: string | null
  request_id: string | null
  evidence: string
  created_at: bigint
}

/** A reference's answer to an audit prompt at a bound (JSON), recorded once and compared with every audit of it. */
export interface AuditReferencesTable {
  model: string
  prompt_id: string
  max_tokens: number
  provider: string
  /** The reference offer's signature when it answered: a change of what it serves asks again. */
  offer_signature: string
  request_id: string | null
  answer: string
  recorded_at: bigint
}

/** An offer's verification state as its audits left it, and since when. */
export interface OfferStatesTable {
  provider: string
  model: string
  state: string
  offer_signature: string
  passed: number
  failed: number
  last_audit_at: bigint
  since: bigint
}

/** A response's conversation (under its id) or one of its output items, kept for the Responses API. */
export interface KeptResponsesTable {
  key_id: string
  item_id: string
  /** JSON: the conversation's input items, or the one item. */
  body: string
  created_at: bigint
}

export interface RequestsInFlightTable {
  request_id: string
  owner: string
  account_id: bigint | number
  key_id: string
  model: string
  stream: number
  prompt_tokens: number
  created_at: bigint
  cut_off_at: bigint | null
}

export interface IdempotencyTable {
  key_id: string
  idem_key: string
  request_id: string
  body_hash: string
  state: string
  reply_status: number | bigint | null
  reply_body: string | null
  created_at: bigint
}

export interface RefusalCountsTable {
  account_id: bigint | number
  key_id: string
  model: string
  code: string
  minute: bigint
  count: bigint
}

/** A provider's OpenAI-compatible endpoint; `api_key` is sent upstream and never shown back. */
export interface ProviderEndpointsTable {
  id: string
  account_id: number
  base_url: string
  api_key: string | null
  bundle: string
  profile: string
  status: 'live' | 'withdrawn'
  created_at: bigint
  updated_at: bigint
}

/** An endpoint's offer of a model: prices in base units per million tokens. */
export interface ProviderOffersTable {
  endpoint_id: string
  model: string
  upstream_model: string
  input_price: bigint
  output_price: bigint
  max_concurrency: number
  status: 'live' | 'paused' | 'withdrawn'
  updated_at: bigint
}
