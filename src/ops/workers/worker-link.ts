import cluster from 'node:cluster'
import { AggregatorRegistry, type Registry } from 'prom-client'
import { isSvcMessage, Replies, WORKER_INDEX_ENV, type ToPrimary } from './messages.js'

/** How long a worker waits for the primary's answer to "is the server ready?" before it answers unready itself. */
const ASK_MS = 3_000

/**
 * A worker's side of the channel to its primary (`svc serve --workers N`, node:cluster): it says where it listens,
 * hands its metrics to the primary's one `/metrics`, and answers `GET /readyz` for the whole server by asking the
 * primary, which asks every worker for its own problems.
 */
export class WorkerLink {
  /** This worker's place, 0 to N-1: a worker that replaces a dead one takes its index. */
  readonly index: number
  private readonly replies = new Replies<string[]>()
  private ownProblems: () => Promise<string[]> = async () => []

  private constructor(index: number) {
    this.index = index
    process.on('message', (m: unknown) => {
      if (!isSvcMessage(m)) return
      if (m.type === 'svc:ready') {
        this.replies.answer(m.id, m.problems)
      } else if (m.type === 'svc:local?') {
        void this.ownProblems().then(
          (problems) => this.send({ type: 'svc:local', id: m.id, problems }),
          (err: Error) => this.send({ type: 'svc:local', id: m.id, problems: [`readiness failed: ${err.message}`] }),
        )
      }
    })
  }

  /** The link of this process when it is a worker of `svc serve --workers N`; otherwise undefined. */
  static ofThisProcess(): WorkerLink | undefined {
    if (!cluster.isWorker) return undefined
    return new WorkerLink(Number(process.env[WORKER_INDEX_ENV] ?? cluster.worker?.id ?? 0))
  }

  /** The primary's `/metrics` reads `registry` (prom-client's cluster protocol). */
  shareMetrics(registry: Registry): void {
    // Constructed for its side effect: prom-client answers the primary's requests once an aggregator exists.
    new AggregatorRegistry()
    AggregatorRegistry.setRegistries([registry])
  }

  /** `problems` says what keeps this worker from serving; the primary asks it for every `/readyz`. */
  answerReadiness(problems: () => Promise<string[]>): void {
    this.ownProblems = problems
  }

  /** Tells the primary this worker listens at `url`. */
  listening(url: string): void {
    this.send({ type: 'svc:listening', url })
  }

  /** Every worker's problems (none: the whole server is ready), as the primary gathered them. */
  serverProblems(): Promise<string[]> {
    return this.replies.ask((id) => this.send({ type: 'svc:ready?', id }), ASK_MS, [
      `worker ${this.index}: the primary did not answer within ${ASK_MS} ms`,
    ])
  }

  private send(m: ToPrimary): void {
    if (process.connected) process.send!(m)
  }
}
