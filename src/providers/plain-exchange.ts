import type { Dispatcher } from 'undici'
import type { Cancel } from './cancel.js'

export interface PlainReply {
  status: number
  /** The whole body of a 200; the first bytes of any other. */
  text: string
}

/** A 200 reply past the size a plain reply may have: the request was dropped. */
export class ReplyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`reply larger than ${limit / 1024 / 1024} MiB`)
  }
}

/** A 200 reply that broke after it began: a byte of it came back, so the request reached the upstream. */
export class ReplyBroken extends Error {
  readonly code: string | undefined

  constructor(cause: unknown) {
    const e = cause as { code?: string; message?: string }
    super(e.message ?? String(cause), { cause })
    this.code = e.code
  }
}

export interface PlainRequest {
  path: string
  headers: Record<string, string>
  body: string
  headersTimeout: number
  bodyTimeout: number
}

/**
 * One plain POST through undici's dispatcher, its reply gathered whole (docs/architecture.md §15.2). Rejects on a
 * failed connection, undici's timeouts, or `cancel` (at once, even while queued). A non-200 keeps its first
 * `limits.errorBytes` and resolves if cut short; a 200 past `limits.replyBytes` rejects with `ReplyTooLarge`.
 */
export function plainExchange(
  pool: Dispatcher,
  req: PlainRequest,
  cancel: Cancel,
  limits: { errorBytes: number; replyBytes: number },
): Promise<PlainReply> {
  return new Promise<PlainReply>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let status = 0
    let controller: Dispatcher.DispatchController | undefined
    const cancelled = () => new Error('request cancelled')
    // Still queued for a connection: refused now (its timeout or its client must not wait for one), and dropped
    // when it reaches one (onRequestStart).
    const onCancel = () => (controller ? controller.abort(cancelled()) : reject(cancelled()))
    cancel.once('abort', onCancel)
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c
        if (cancel.aborted) c.abort(cancelled())
      },
      onResponseStart(_c, statusCode) {
        status = statusCode
      },
      onResponseData(c, chunk) {
        if (status !== 200 && size >= limits.errorBytes) return
        if (size + chunk.length > limits.replyBytes) return c.abort(new ReplyTooLarge(limits.replyBytes))
        chunks.push(chunk)
        size += chunk.length
      },
      onResponseEnd() {
        cancel.removeListener('abort', onCancel)
        resolve({ status, text: Buffer.concat(chunks, size).toString('utf8') })
      },
      onResponseError(_c, err) {
        cancel.removeListener('abort', onCancel)
        // A refusal cut short still refused: its status says what matters.
        if (status !== 0 && status !== 200) resolve({ status, text: Buffer.concat(chunks, size).toString('utf8') })
        else reject(status === 200 && !(err instanceof ReplyTooLarge) ? new ReplyBroken(err) : err)
      },
    }
    try {
      pool.dispatch(
        {
          path: req.path,
          method: 'POST',
          headers: req.headers,
          body: req.body,
          headersTimeout: req.headersTimeout,
          bodyTimeout: req.bodyTimeout,
        },
        handler,
      )
    } catch (err) {
      cancel.removeListener('abort', onCancel)
      reject(err)
    }
  })
}
