import { apiError, type ApiError } from '../protocol/errors.js'

export interface IntakeLimits {
  /** Chat requests one account may have in flight at this process. */
  perAccount: number
  /** Bytes of chat request bodies this process takes in at once (each counted at its Content-Length, else at `bodyLimit`). */
  bodyBytes: number
  /** The largest body a request may send: what one without a Content-Length is counted at. */
  bodyLimit: number
}

/**
 * What this process has taken in of chat requests, from their key check (before their body is read) until their
 * response closes. One account's slow streams cannot take every slot of every offer from the others, and bodies held
 * just short of complete cannot take the memory: past either limit a request is refused before its body is read.
 * Per process, as the offers' own counts are (DESIGN §11).
 */
export class Intake {
  private readonly taken = new Map<number, number>()
  private bytes = 0

  constructor(readonly limits: IntakeLimits) {}

  /** Takes the request in, or says why not; one taken in is given back with `leave` and the same arguments. */
  enter(account: number, contentLength: string | undefined): ApiError | number {
    const n = this.taken.get(account) ?? 0
    if (n >= this.limits.perAccount) return accountBusy(this.limits.perAccount)
    const size = contentLength === undefined ? this.limits.bodyLimit : Math.min(Number(contentLength) || 0, this.limits.bodyLimit)
    if (this.bytes + size > this.limits.bodyBytes) return bodiesFull(this.limits.bodyBytes)
    this.taken.set(account, n + 1)
    this.bytes += size
    return size
  }

  leave(account: number, size: number): void {
    const n = this.taken.get(account) ?? 0
    if (n <= 1) this.taken.delete(account)
    else this.taken.set(account, n - 1)
    this.bytes -= size
  }

  /** Bytes of bodies counted now (tests, and a look at load). */
  get bodyBytes(): number {
    return this.bytes
  }
}

function accountBusy(limit: number): ApiError {
  return apiError('no_capacity', `This account has ${limit} requests in flight, the most this gateway serves at once for one account; retry when one has finished.`, { retryAfter: 1 })
}

function bodiesFull(limit: number): ApiError {
  return apiError('no_capacity', `This gateway is taking in ${Math.round(limit / 1024 / 1024)} MiB of request bodies at once, the most it takes; retry after 1 s.`, { retryAfter: 1 })
}
