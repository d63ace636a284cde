/**
 * The messages a server's primary and its workers exchange over node:cluster's channel (prom-client's metrics
 * requests travel on the same channel with their own types). Every type here starts with `svc:`.
 */

/** A worker to the primary: it listens at `url`. */
export interface Listening {
  type: 'svc:listening'
  url: string
}

/** A worker to the primary: is the whole server ready? (`GET /readyz` on that worker). */
export interface ReadyAsk {
  type: 'svc:ready?'
  id: number
}

/** The primary to a worker: the answer to its `svc:ready?`, every worker's problems. */
export interface ReadyAnswer {
  type: 'svc:ready'
  id: number
  problems: string[]
}

/** The primary to every worker: this worker's own problems, for the answer to a `svc:ready?`. */
export interface LocalAsk {
  type: 'svc:local?'
  id: number
}

/** A worker to the primary: its own problems. */
export interface LocalAnswer {
  type: 'svc:local'
  id: number
  problems: string[]
}

export type ToPrimary = Listening | ReadyAsk | LocalAnswer
export type ToWorker = ReadyAnswer | LocalAsk

const TYPES = new Set(['svc:listening', 'svc:ready?', 'svc:ready', 'svc:local?', 'svc:local'])

/** Whether `m` is one of these messages (and not prom-client's or another module's). */
export function isSvcMessage(m: unknown): m is ToPrimary | ToWorker {
  return typeof m === 'object' && m !== null && TYPES.has((m as { type?: unknown }).type as string)
}

/** The environment variable that gives a worker its index, 0 to N-1, kept by the worker that replaces it. */
export const WORKER_INDEX_ENV = 'SVC_WORKER_INDEX'
/** The environment variable that hands the workers the receipt key the primary made when none was configured. */
export const WORKER_RECEIPT_KEY_ENV = 'SVC_WORKER_RECEIPT_KEY'

/**
 * Questions sent over the channel and their answers, matched by id: `ask` sends one and resolves with its answer, or
 * with `unanswered` after `ms`.
 */
export class Replies<T> {
  private asked = 0
  private readonly waiting = new Map<number, (answer: T) => void>()

  ask(send: (id: number) => void, ms: number, unanswered: T): Promise<T> {
    const id = ++this.asked
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.answer(id, unanswered), ms)
      this.waiting.set(id, (answer) => {
        clearTimeout(timer)
        this.waiting.delete(id)
        resolve(answer)
      })
      send(id)
    })
  }

  /** The answer to question `id`; an answer that came too late is dropped. */
  answer(id: number, answer: T): void {
    this.waiting.get(id)?.(answer)
  }
}
