import { apiError, type ApiError } from '../protocol/errors.js'
import type { RateLimits } from './limits.js'
import {
  MAX_TAKE_TOKENS,
  MINUTE_MS,
  minuteOf,
  type RateAnswer,
  type RateCount,
  type RateCounter,
  type RateTake,
} from './counter.js'

/** What a gateway does when its rate counter (Redis) cannot be reached: admit unchecked, or refuse with 503. */
export type OnCounterDown = 'open' | 'closed'

/** A request counted against its key's limits: the minute it was counted in, and its tokens. */
export interface RateTaken {
  minute: number
  tokens: number
}

/** A rate check: the headers every reply of the key carries, and the request's count, or its refusal. */
export interface RateCheck {
  headers: Record<string, string>
  /** Absent when it went unchecked (the counter down, `onDown` open) or was refused. */
  taken?: RateTaken
  error?: ApiError
}

export interface RateGateDeps {
  counter: RateCounter
  /**
   * The counter is the store's, whose hold counts each take first (`HoldRequest.rate`; on SQLite in the hold's own
   * transaction): the pipeline hands the hold a `RateTake` (`toTake`) and reads its answer (`checked`) instead of
   * calling `take`.
   */
  inHold?: boolean
  onDown: OnCounterDown
  now: () => number
  /** Told when the counter stops and starts answering again. */
  log: (msg: string, err?: unknown) => void
  /** Told of each request admitted or refused without a rate check. */
  unchecked: (policy: OnCounterDown) => void
}

/**
 * Per-key limits of requests and tokens a minute. A request counts its maximum tokens when admitted (`take`) and is
 * corrected to what it was billed when it ends (`correct`). Refusals are 429 `rate_limit_exceeded` with Retry-After and
 * OpenAI's `x-ratelimit-*` headers, which every reply of a limited key carries.
 */
export class RateGate {
  private down = false
  /** Token corrections asked for while the last ones are written, by key and minute: written together next. */
  private corrections = new Map<string, { keyId: string; minute: number; delta: number }>()
  /** The write of the corrections before these, and the one after it (which `correct` callers wait for). */
  private writing: Promise<void> | undefined
  private next: Promise<void> | undefined

  constructor(private readonly deps: RateGateDeps) {}

  /** Whether takes are counted in their holds' transactions (`RateGateDeps.inHold`). */
  get inHold(): boolean {
    return this.deps.inHold === true
  }

  /** Counts a request of `tokens` for the key, or refuses it. */
  async take(keyId: string, limits: RateLimits, tokens: number): Promise<RateCheck> {
    const take = this.toTake(limits, tokens)
    let answer
    try {
      answer = await this.deps.counter.take(keyId, take.minute, limits, take.tokens)
    } catch (err) {
      return this.counterDown(err)
    }
    if (this.down) {
      this.down = false
      this.deps.log('rate limits: the counter answers again')
    }
    return this.checked(take, answer)
  }

  /** A request of `tokens` to count in the current minute (at most MAX_TAKE_TOKENS). */
  toTake(limits: RateLimits, tokens: number): RateTake {
    return { minute: minuteOf(this.deps.now()), limits, tokens: Math.min(tokens, MAX_TAKE_TOKENS) }
  }

  /** What a counter answered `take`: the key's headers, and the request's count or its refusal. */
  checked({ minute, limits, tokens }: RateTake, answer: RateAnswer): RateCheck {
    const resetS = Math.max(1, Math.ceil(((minute + 1) * MINUTE_MS - this.deps.now()) / 1000))
    const headers = rateHeaders(limits, answer.count, resetS)
    if (answer.taken) return { headers, taken: { minute, tokens } }
    return { headers, error: refusal(limits, answer.count, tokens, resetS) }
  }

  /**
   * The request ended having been billed `used` tokens: resolves once its count is corrected in the counter (every
   * gateway then counts it so), before its reply goes out. Until then the key is counted its maximum: a correction only
   * gives tokens back. Corrections asked for while others are written go together in the next write. Never rejects:
   * a correction the counter refused is logged, and the key stays counted its maximum for that minute.
   */
  correct(keyId: string, taken: RateTaken, used: number): Promise<void> {
    if (used === taken.tokens) return Promise.resolve()
    const at = `${keyId}\0${taken.minute}`
    const c = this.corrections.get(at)
    if (c) c.delta += used - taken.tokens
    else this.corrections.set(at, { keyId, minute: taken.minute, delta: used - taken.tokens })
    return (this.next ??= this.afterWriting())
  }

  /** The write of the corrections gathered, once the one underway (if any) is done. */
  private async afterWriting(): Promise<void> {
    await this.writing
    this.writing = this.next
    this.next = undefined
    const due = [...this.corrections.values()]
    this.corrections = new Map()
    try {
      await Promise.all(
        due.map((c) =>
          this.deps.counter
            .correct(c.keyId, c.minute, c.delta)
            .catch((err) => this.deps.log('rate limits: a token count was not corrected', err)),
        ),
      )
    } finally {
      this.writing = undefined
    }
  }

  /** The key's counts this minute and when they reset (seconds since the epoch); null when the counter is down. */
  async current(keyId: string): Promise<{ count: RateCount; resets: number } | null> {
    const minute = minuteOf(this.deps.now())
    try {
      return { count: await this.deps.counter.peek(keyId, minute), resets: ((minute + 1) * MINUTE_MS) / 1000 }
    } catch {
      return null
    }
  }

  /** Closes the counter's connection (Redis); the store's closes with the store. */
  async close(): Promise<void> {
    await this.next
    await this.writing
    await this.deps.counter.close()
  }

  private counterDown(err: unknown): RateCheck {
    if (!this.down) {
      this.down = true
      this.deps.log(
        `rate limits: the counter does not answer; requests are ${this.deps.onDown === 'open' ? 'admitted unchecked' : 'refused'}`,
        err,
      )
    }
    this.deps.unchecked(this.deps.onDown)
    if (this.deps.onDown === 'open') return { headers: {} }
    const error = apiError('no_capacity', "This key's rate limits cannot be checked right now; retry shortly.", {
      retryAfter: 1,
    })
    return { headers: {}, error }
  }
}

function refusal(limits: RateLimits, count: RateCount, tokens: number, resetS: number): ApiError {
  const { rpm, tpm } = limits
  const may = tokens < MAX_TAKE_TOKENS ? tokens : `${MAX_TAKE_TOKENS} or more`
  const why =
    rpm !== null && count.requests + 1 > rpm
      ? `${rpm} request${rpm === 1 ? '' : 's'} a minute`
      : tpm !== null && tokens > tpm
        ? `${tpm} tokens a minute, and this request may take ${may} (its prompt and max_tokens)`
        : `${tpm} tokens a minute (${count.tokens} counted this minute; this request may take ${may})`
  return apiError('rate_limit_exceeded', `This key's rate limit is ${why}. Retry after ${resetS} s.`, {
    retryAfter: resetS,
  })
}

/** OpenAI's rate-limit headers for the limits the key has. */
export function rateHeaders(limits: RateLimits, count: RateCount, resetS: number): Record<string, string> {
  const h: Record<string, string> = {}
  if (limits.rpm !== null) {
    h['x-ratelimit-limit-requests'] = String(limits.rpm)
    h['x-ratelimit-remaining-requests'] = String(Math.max(0, limits.rpm - count.requests))
    h['x-ratelimit-reset-requests'] = `${resetS}s`
  }
  if (limits.tpm !== null) {
    h['x-ratelimit-limit-tokens'] = String(limits.tpm)
    h['x-ratelimit-remaining-tokens'] = String(Math.max(0, limits.tpm - count.tokens))
    h['x-ratelimit-reset-tokens'] = `${resetS}s`
  }
  return h
}
