import { EventEmitter } from 'node:events'

/**
 * A request's cancellation: set once, announced by an 'abort' event. Shaped as undici takes a signal (an EventEmitter
 * with `aborted`; without a `reason`, undici aborts with its own RequestAbortedError). Not an
 * AbortController: that costs more on the request path (docs/architecture.md §15.3).
 */
export class Cancel extends EventEmitter {
  aborted = false
  /** Who cancelled: the client going away, or the gateway stopping past its grace. */
  cause: 'client' | 'stopping' | undefined

  abort(cause: 'client' | 'stopping' = 'client'): void {
    if (this.aborted) return
    this.aborted = true
    this.cause = cause
    this.emit('abort')
  }
}

/**
 * `pending`, or a rejection as soon as `cancel` fires. undici acts on a request's signal only once the request has a
 * connection: one queued behind a busy pool would outlive its timeout and its client. What `pending` brings after
 * losing is handed to `drop`.
 */
export function untilAborted<T>(cancel: Cancel, pending: Promise<T>, drop: (late: T) => void): Promise<T> {
  if (cancel.aborted) {
    pending.then(drop, () => {})
    return Promise.reject(new Error('request cancelled'))
  }
  return new Promise((resolve, reject) => {
    let lost = false
    const onAbort = () => {
      lost = true
      reject(new Error('request cancelled'))
    }
    cancel.once('abort', onAbort)
    pending.then(
      (value) => {
        cancel.removeListener('abort', onAbort)
        if (lost) drop(value)
        else resolve(value)
      },
      (err) => {
        cancel.removeListener('abort', onAbort)
        reject(err)
      },
    )
  })
}
