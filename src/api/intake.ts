import { apiError, type ApiError } from '../protocol/errors.js'

export interface IntakeLimits {
  /** Chat requests one account may have in flight at this process. */
  perAccount: number
  /**
   * Bytes of chat request bodies this process reads at once (each counted at its Content-Length, else at `bodyLimit`).
   */
  bodyBytes: number
  /** The largest body a request may send: what one without a Content-Length is counted at. */
  bodyLimit: number
}

/** One request taken in: its account's slot until `leave`, its body's bytes until `bodyRead` (or `leave`). */
export interface Ticket {
  readonly account: number
  bytes: number
}

/**
 * What this process has taken in of chat requests, from their key check: a slot of the account until the response
 * closes, and the body's bytes until read. Past either limit a request is refused before its body is read; per process,
 * as the offers' counts are (docs/architecture.md §11, §15.25).
 */
export class Intake {
  private readonly taken = new Map<number, number>()
  private bytes = 0

  constructor(readonly limits: IntakeLimits) {}

  /** Takes the request in, or says why not. */
  enter(account: number, contentLength: string | undefined): Ticket | ApiError {
    const n = this.taken.get(account) ?? 0
    if (n >= this.limits.perAccount) return accountBusy(this.limits.perAccount)
    const bytes =
      contentLength === undefined ? this.limits.bodyLimit : Math.min(Number(contentLength) || 0, this.limits.bodyLimit)
    if (this.bytes + bytes > this.limits.bodyBytes) return bodiesFull(this.limits.bodyBytes)
    this.taken.set(account, n + 1)
    this.bytes += bytes
    return { account, bytes }
  }

  /** The body has been read (and parsed): its bytes no longer count. */
  bodyRead(ticket: Ticket): void {
    this.bytes -= ticket.bytes
    ticket.bytes = 0
  }

  /** The request is over: its slot is given back, and its body's bytes if they still counted. */
  leave(ticket: Ticket): void {
    this.bodyRead(ticket)
    const n = this.taken.get(ticket.account) ?? 0
    if (n <= 1) this.taken.delete(ticket.account)
    else this.taken.set(ticket.account, n - 1)
  }
}

function accountBusy(limit: number): ApiError {
  return apiError(
    'no_capacity',
    `This account has ${limit} requests in flight, the most this gateway serves at once for one account; retry when one has finished.`,
    { retryAfter: 1 },
  )
}

function bodiesFull(limit: number): ApiError {
  return apiError(
    'no_capacity',
    `This gateway is reading ${Math.round(limit / 1024 / 1024)} MiB of request bodies at once, the most it takes; retry after 1 s.`,
    { retryAfter: 1 },
  )
}
