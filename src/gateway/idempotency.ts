import { createHash } from 'node:crypto'
import { apiError, clipped, type ApiError } from '../protocol/errors.js'
import type { Caller } from '../auth/caller.js'
import type { IdempotencyRepo } from '../store/idempotency.js'
import type { UsageRepo } from '../store/usage.js'
import type { Finished } from './charge.js'

/** A key a client may send: 1 to 255 visible ASCII characters. */
const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/

/** A request under an idempotency key, as the pipeline goes on with it. */
export type Idempotent =
  /** First under its key: run it, then `finish` the key with how it finished. */
  | { kind: 'run'; finish: (f: Finished | undefined, stream: boolean) => Promise<Remember | undefined> }
  /** Its key's first request finished with this reply: sent again, nothing run or charged. */
  | { kind: 'replay'; status: number; body: string; firstRequestId: string }
  | { kind: 'refused'; error: ApiError }

/** Keeps a plain reply's text to send again to a retry. */
export type Remember = (body: string) => Promise<void>

/**
 * `Idempotency-Key`: a request that repeats a key its API key sent within 24 hours is not run or charged again. A
 * finished plain request's reply is sent again; one in flight, a stream, or another body under the key is refused
 * (409) naming the first request. A first request that charged nothing frees its key for a retry.
 */
export class Idempotency {
  constructor(
    private readonly repo: IdempotencyRepo,
    private readonly usage: UsageRepo,
    private readonly now: () => number,
  ) {}

  async begin(caller: Caller, key: string, body: unknown, requestId: string): Promise<Idempotent> {
    if (!KEY_SHAPE.test(key)) {
      const message = 'Idempotency-Key must be 1 to 255 visible ASCII characters.'
      return { kind: 'refused', error: apiError('feature_not_supported', message, { param: 'Idempotency-Key' }) }
    }
    const claim = { keyId: caller.keyId, key, requestId, bodyHash: bodyHashOf(body), now: this.now() }
    const first = await this.repo.claim(claim)
    if (first === 'claimed') return this.run(caller.keyId, key, requestId)
    const named = `Idempotency-Key ${JSON.stringify(clipped(key))} was first sent with request ${first.requestId}`
    if (first.bodyHash !== claim.bodyHash)
      return conflict(`${named} and another body; use a new key for a new request.`)
    if (first.state === 'replayable' && first.reply) {
      return { kind: 'replay', status: first.reply.status, body: first.reply.body, firstRequestId: first.requestId }
    }
    if (first.state === 'stream') {
      return conflict(
        `${named}, a stream, which is not sent again; GET /v1/usage/${first.requestId} shows what it cost.`,
      )
    }
    const record = await this.usage.get(caller.accountId, first.requestId)
    if (record === undefined) return conflict(`${named}, which is still being served; retry once it has finished.`)
    if (record.cost > 0n) {
      return conflict(
        `${named}, which was charged but whose reply was lost; GET /v1/usage/${first.requestId} shows it.`,
      )
    }
    // It ended uncharged without freeing its key (its gateway stopped): this request takes it over.
    if (await this.repo.takeOver(claim, first.requestId)) return this.run(caller.keyId, key, requestId)
    return conflict(`${named}, and another retry took it meanwhile; retry once that one has finished.`)
  }

  private run(keyId: string, key: string, requestId: string): Idempotent {
    const finish = async (f: Finished | undefined, stream: boolean): Promise<Remember | undefined> => {
      const charged = f?.kind === 'delivered' || (f?.kind === 'closed' && f.charged)
      if (!charged) {
        await this.repo.forget(keyId, key, requestId)
        return undefined
      }
      if (stream || f.kind === 'closed') {
        await this.repo.finish(keyId, key, requestId, 'stream')
        return undefined
      }
      return (body) => this.repo.finish(keyId, key, requestId, { status: 200, body })
    }
    return { kind: 'run', finish }
  }
}

function conflict(message: string): Idempotent {
  return {
    kind: 'refused',
    error: apiError('feature_not_supported', message, { param: 'Idempotency-Key', status: 409 }),
  }
}

/** The hash a repeated request's body is compared by: its JSON as parsed, so spacing does not matter. */
function bodyHashOf(body: unknown): string {
  return (
    createHash('sha256')
      // No body at all (undefined) has no JSON.
      .update((JSON.stringify(body) as string | undefined) ?? '')
      .digest('hex')
  )
}
