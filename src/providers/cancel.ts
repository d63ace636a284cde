import { EventEmitter } from 'node:events'

/**
 * A request's cancellation: set once, announced by an 'abort' event. Shaped as undici takes a signal (an
 * EventEmitter with `aborted`; without a `reason`, undici aborts with its own RequestAbortedError), and used instead of an AbortController on the request path: making one
 * and adding and removing its listeners cost several µs each time here, twice per request (the client's going
 * away, and each attempt's timeout), against a fraction of a µs for this.
 */
export class Cancel extends EventEmitter {
  aborted = false

  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.emit('abort')
  }
}
