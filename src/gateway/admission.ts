import { apiError, type ApiError } from '../protocol/errors.js'
import { formatUsdc, priceOf } from '../money/usdc.js'
import { spendableOf, type Account } from '../store/accounts.js'
import type { AccountRepo } from '../store/accounts.js'
import type { LedgerRepo } from '../store/ledger/repo.js'
import { MAX_STORED } from '../store/chain.js'
import { refusalOf, type KeySpend } from '../store/ledger/types.js'
import { periodEnd, spentNow } from '../limits/period.js'
import type { Prepared } from './prepare.js'

/**
 * What admission reads of a prepared request: its plan's prices, its input and output bounds, and how the request
 * named the output bound. An embeddings request is one with no output (`maxTokens` 0).
 */
export type Admissible = Pick<Prepared, 'plan' | 'inputTokens' | 'maxTokens' | 'model'> & {
  request: Partial<Pick<Prepared['request'], 'max_tokens' | 'max_completion_tokens'>>
}
import type { RequestContext } from './context.js'
import type { RateAnswer, RateTake } from '../limits/counter.js'

/** A rate take for the hold to count, and what to do with the counter's answer: its refusal, if it refuses. */
export interface HoldRate {
  take: RateTake
  answered: (a: RateAnswer) => ApiError | undefined
}

/** What admission reads and writes: the accounts (for a refusal's figures) and the ledger's holds. */
export interface AdmissionStore {
  accounts: AccountRepo
  ledger: LedgerRepo
}

/**
 * The most a request can cost: input estimate and max_tokens at the highest prices of its plan (docs/architecture.md
 * §4).
 */
export function maxCostOf(p: Admissible): bigint {
  return priceOf(p.plan.ceiling, p.inputTokens, p.maxTokens)
}

/**
 * Whether the request's maximum cost is an amount the store can hold. One past it (a huge max_tokens on svc/cortex@1)
 * is more than any account can spend: it is refused before any hold.
 */
export function holdable(p: Admissible): boolean {
  return maxCostOf(p) <= MAX_STORED
}

const count = (n: number) => n.toLocaleString('en-US')

/**
 * Holds the maximum cost, atomically; refuses with insufficient_quota (nothing charged) when spendable does not cover
 * it.
 */
export async function admit(
  store: AdmissionStore,
  { requestId, caller }: RequestContext,
  p: Admissible,
  opts: { owner: string; now: number; holdTtlMs: number; rate?: HoldRate },
): Promise<{ amount: bigint } | ApiError> {
  const amount = maxCostOf(p)
  // Not `holdable`: more than any account can spend, refused without a hold.
  const result =
    amount > MAX_STORED
      ? refusalOf(await store.accounts.byId(caller.accountId))
      : await store.ledger.hold({
          requestId,
          accountId: caller.accountId,
          keyId: caller.keyId,
          model: p.model,
          amount,
          owner: opts.owner,
          now: opts.now,
          expiresAt: opts.now + opts.holdTtlMs,
          ...(caller.spend ? { spendReset: caller.spend.reset } : {}),
          ...(opts.rate ? { rate: opts.rate.take } : {}),
        })
  const rateRefusal =
    result.rate && opts.rate?.answered({ taken: result.ok || result.reason !== 'rate_limit', count: result.rate })
  if (rateRefusal) return rateRefusal
  if (result.ok) return { amount }
  if (result.reason === 'rate_limit')
    throw new Error(`${requestId}: a rate refusal of a hold that carried no rate take`)
  if (result.reason === 'suspended')
    return apiError(
      'account_suspended',
      'This account is suspended; its keys cannot make requests. Nothing was charged.',
    )
  if (result.reason === 'missing') return apiError('invalid_api_key', 'The account behind this key no longer exists.')
  if (result.reason === 'key_limit')
    return apiError('insufficient_quota', keyLimitMessage(amount, result.key, opts.now))
  return apiError('insufficient_quota', refusalMessage(p, amount, result.account!, result.reason === 'in_debt'))
}

function refusalMessage(p: Admissible, amount: bigint, a: Account, inDebt: boolean): string {
  const spendable = spendableOf(a)
  if (p.maxTokens === 0) {
    const head =
      `This request could cost up to ${formatUsdc(amount)} USDC (${count(p.inputTokens)} input tokens, at the offer price); ` +
      `${formatUsdc(spendable)} USDC is spendable (balance ${formatUsdc(a.balance)}, approved cap ${formatUsdc(a.cap)}, held ${formatUsdc(a.held)}).`
    if (inDebt)
      return `${head} The account owes ${formatUsdc(a.debt)} USDC that settlement could not collect. Nothing was charged.`
    return `${head} Send fewer inputs, deposit USDC, or raise the approved spending cap. Nothing was charged.`
  }
  const field = p.request.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens'
  const sent = (p.request.max_completion_tokens ?? p.request.max_tokens) != null
  const output = sent
    ? `${field} ${count(p.maxTokens)}`
    : `a reply of up to ${count(p.maxTokens)} tokens, as no max_tokens was sent`
  const head =
    `This request could cost up to ${formatUsdc(amount)} USDC (${count(p.inputTokens)} input tokens estimated + ${output}, at the offer price); ` +
    `${formatUsdc(spendable)} USDC is spendable (balance ${formatUsdc(a.balance)}, approved cap ${formatUsdc(a.cap)}, held ${formatUsdc(a.held)}).`
  if (inDebt)
    return `${head} The account owes ${formatUsdc(a.debt)} USDC that settlement could not collect; cover it (restore the balance and the approval) before new requests. Nothing was charged.`
  return `${head} Lower ${field}, deposit USDC, or raise the approved spending cap. Nothing was charged.`
}

const PERIOD = { daily: 'a day', weekly: 'a week', monthly: 'a month', none: 'in all' } as const

/** Why a key's spend limit refused a request: the limit, what the period spent and holds, and when it resets. */
function keyLimitMessage(amount: bigint, k: KeySpend, now: number): string {
  const spent = spentNow(k, now)
  const ends = periodEnd(k.reset, now)
  const limit = k.limit === null ? 'limit' : `limit of ${formatUsdc(k.limit)} USDC ${PERIOD[k.reset]}`
  const resets =
    ends === null ? 'It does not reset: raise it' : `It resets at ${new Date(ends).toISOString()}; raise it`
  return (
    `This request could cost up to ${formatUsdc(amount)} USDC, more than this key's spend ${limit} leaves: ` +
    `${formatUsdc(spent)} USDC spent and ${formatUsdc(k.periodHeld)} USDC held by requests in flight this period. ` +
    `${resets} on the key, or lower max_tokens. Nothing was charged.`
  )
}
