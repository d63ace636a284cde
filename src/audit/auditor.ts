import { ulid } from '../ids/request-id.js'
import type { Catalog, Offer } from '../routing/catalog.js'
import { AUDIT_HORIZON_MS, AUDIT_WINDOW, verificationOf, type VerificationState } from '../routing/verification.js'
import type { AuditRepo, AuditRow, OfferStateRow } from '../store/audits.js'
import type { Lock } from '../store/dialect.js'
import type { HeldEarningsRepo } from '../store/held-earnings.js'
import { compareAnswers, type AuditAnswer, type TokenChoice } from './compare.js'
import type { AuditPrompt } from './prompts.js'

/** An audit request's reply as delivered and charged, or why there was none. */
export type AuditReply =
  | {
      requestId: string
      text: string
      /** `logprobs.content` as the provider sent it; undefined when it sent none. */
      logprobs?: readonly unknown[]
      finish: string
      /** Output tokens the provider reported, and those the gateway counted (and charged). */
      reported?: number
      counted: number
    }
  | { requestId: string; failed: string }

/**
 * Sends one audit request through the gateway as a client's, pinned to `offer` and paid by the audit account: the
 * same body, admission, charge, usage record and receipt as any request.
 */
export type AuditSend = (offer: Offer, body: Record<string, unknown>) => Promise<AuditReply>

export interface AuditorOptions {
  catalog: Catalog
  audits: AuditRepo
  /** Where a quarantined offer's earnings are held back from settlement. */
  held: HeldEarningsRepo
  /** One gateway audits at a time: the holder of this lock. */
  tryLock: () => Promise<Lock | null>
  send: AuditSend
  prompts: readonly AuditPrompt[]
  /** Time between two audits of one offer; 0: none but those asked for (`svc audit run`). */
  intervalMs: number
  maxTokens: number
  now: () => number
  log: (msg: string, err?: unknown) => void
  /** Each audit's result, for the metrics. */
  onResult?: (result: AuditRow['result']) => void
  /** Which prompt of `n` the next audit uses (default: at random). */
  choose?: (n: number) => number
}

/** How often due offers are looked for, at most (an offer that changed is audited within it). */
const TICK_MS = 5_000
/** Alternatives asked for each token: enough to tell a near tie. */
const TOP_LOGPROBS = 5

/**
 * Audits offers (docs/architecture.md §11a): each live offer of a model with a reference is sent a prompt from the
 * pool at temperature 0, with a seed and log probabilities, every `intervalMs` and after each change of the offer;
 * its reply is compared with the reference's answer to that prompt (recorded the first time it is needed), and the
 * offer's verification state follows its audits.
 */
export class Auditor {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<unknown> | undefined
  private stopped = false

  constructor(private readonly o: AuditorOptions) {}

  start(): void {
    if (this.o.intervalMs <= 0) return
    this.timer = setInterval(
      () => void this.round().catch((err) => this.o.log('audits failed', err)),
      Math.min(TICK_MS, this.o.intervalMs),
    )
    this.timer.unref()
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer) clearInterval(this.timer)
    await this.running?.catch(() => {})
  }

  /** Audits every due offer, one after another, when this gateway holds the audit lock; how many. */
  async round(): Promise<number> {
    if (this.running) return 0
    const run = this.auditDue()
    this.running = run
    try {
      return await run
    } finally {
      this.running = undefined
    }
  }

  private async auditDue(): Promise<number> {
    const lock = await this.o.tryLock()
    if (!lock) return 0
    try {
      const states = new Map((await this.o.audits.states()).map((s) => [`${s.provider}|${s.model}`, s]))
      const now = this.o.now()
      const due = this.auditable().filter((o) => {
        const s = states.get(o.key)
        return !s || s.offerSignature !== o.signature || now - s.lastAuditAt >= this.o.intervalMs
      })
      let n = 0
      for (const offer of due) {
        if (this.stopped) break
        await this.audit(offer)
        n++
      }
      return n
    } finally {
      await lock.release()
    }
  }

  /** Offers that can be audited: of a model with a reference, not the reference itself, not the managed vendor. */
  auditable(): Offer[] {
    return (
      [...this.o.catalog.offers.values()]
        .flat()
        .filter((o) => !this.o.catalog.references.has(o.key) && this.referenceOf(o.modelId) !== undefined)
        // Audits compare generated tokens: an embedding model generates none.
        .filter((o) => this.o.catalog.models.get(o.modelId)?.capabilities.workload !== 'embedding')
    )
  }

  private referenceOf(model: string): Offer | undefined {
    return (this.o.catalog.offers.get(model) ?? []).find((o) => this.o.catalog.references.has(o.key))
  }

  /**
   * Audits `offers` now, one after another, holding the audit lock as a round does (no gateway audits them meanwhile);
   * undefined when another process holds it.
   */
  async auditHolding(offers: readonly Offer[], promptId?: string): Promise<AuditRow[] | undefined> {
    const lock = await this.o.tryLock()
    if (!lock) return undefined
    try {
      const done: AuditRow[] = []
      for (const offer of offers) done.push(await this.audit(offer, promptId))
      return done
    } finally {
      await lock.release()
    }
  }

  /** Whether the pool has a prompt of this id. */
  hasPrompt(id: string): boolean {
    return this.o.prompts.some((p) => p.id === id)
  }

  /** Audits one offer now (with the pool's prompt `promptId`, or one at random); the audit as recorded. */
  async audit(offer: Offer, promptId?: string): Promise<AuditRow> {
    const pool = this.o.prompts
    const prompt = promptId
      ? pool.find((p) => p.id === promptId)
      : pool[(this.o.choose ?? ((n) => Math.floor(Math.random() * n)))(pool.length)]
    if (!prompt) throw new Error(`no audit prompt ${promptId}`)
    const reference = this.referenceOf(offer.modelId)
    const row = (result: AuditRow['result'], evidence: Record<string, unknown>, extra: Partial<AuditRow> = {}) => ({
      id: `aud_${ulid(this.o.now())}`,
      model: offer.modelId,
      provider: offer.provider,
      offerSignature: offer.signature,
      promptId: prompt.id,
      result,
      reason: null,
      requestId: null,
      evidence,
      createdAt: this.o.now(),
      ...extra,
    })
    let audit: AuditRow
    const expected = reference
      ? await this.referenceAnswer(reference, prompt)
      : { failed: 'the model has no reference' }
    if ('failed' in expected) {
      audit = row('inconclusive', { why: `no reference answer: ${expected.failed}` })
    } else {
      const reply = await this.o.send(offer, this.bodyOf(offer, prompt))
      if ('failed' in reply) {
        audit = row(
          'inconclusive',
          { why: reply.failed, reference_request_id: expected.requestId },
          { requestId: reply.requestId },
        )
      } else {
        const verdict = compareAnswers(expected.answer, {
          ...answerOf(reply),
          reported: reply.reported,
          counted: reply.counted,
        })
        audit = row(
          verdict.result,
          {
            ...verdict,
            reference: expected.provider,
            reference_request_id: expected.requestId,
            text: reply.text,
            finish: reply.finish,
          },
          { reason: verdict.reason ?? null, requestId: reply.requestId },
        )
      }
    }
    await this.o.audits.record(audit)
    this.o.onResult?.(audit.result)
    await this.followState(offer, audit)
    return audit
  }

  /** The body an audit sends: a client's request at temperature 0, with a seed and log probabilities. */
  private bodyOf(offer: Offer, prompt: AuditPrompt): Record<string, unknown> {
    return {
      model: offer.modelId,
      messages: prompt.messages,
      max_tokens: this.o.maxTokens,
      temperature: 0,
      // Any seed: at temperature 0 it changes no token, and one per request does not mark audits apart.
      seed: Math.floor(Math.random() * 2 ** 31),
      logprobs: true,
      top_logprobs: TOP_LOGPROBS,
      provider: { only: [offer.provider], allow_fallbacks: false },
    }
  }

  /** The reference's answer to the prompt: recorded, or asked for now and recorded. */
  private async referenceAnswer(
    reference: Offer,
    prompt: AuditPrompt,
  ): Promise<{ answer: AuditAnswer; requestId: string | null; provider: string } | { failed: string }> {
    const kept = await this.o.audits.reference(reference.modelId, prompt.id, this.o.maxTokens)
    if (kept && kept.provider === reference.provider && kept.offerSignature === reference.signature)
      return { answer: kept.answer as unknown as AuditAnswer, requestId: kept.requestId, provider: kept.provider }
    const reply = await this.o.send(reference, this.bodyOf(reference, prompt))
    if ('failed' in reply) return { failed: reply.failed }
    const answer = answerOf(reply)
    await this.o.audits.recordReference(reference.modelId, prompt.id, this.o.maxTokens, {
      provider: reference.provider,
      offerSignature: reference.signature,
      requestId: reply.requestId,
      answer: answer as unknown as Record<string, unknown>,
      recordedAt: this.o.now(),
    })
    return { answer, requestId: reply.requestId, provider: reference.provider }
  }

  /**
   * Holds back a quarantined offer's earnings since its last passed audit (all of them, when none passed), unless they
   * are held already.
   */
  private async holdEarnings(offer: Offer, audit: AuditRow): Promise<void> {
    const [passed] = await this.o.audits.list({
      provider: offer.provider,
      model: offer.modelId,
      result: 'passed',
      limit: 1,
    })
    const { held, created } = await this.o.held.hold({
      id: `held_${ulid(this.o.now())}`,
      provider: offer.provider,
      model: offer.modelId,
      fromAt: passed?.createdAt ?? 0,
      auditId: audit.id,
      now: this.o.now(),
    })
    if (created)
      this.o.log(
        `offer ${offer.key}: its earnings since ${new Date(held.fromAt).toISOString()} are held back from settlement (${held.id}): svc audit release or forfeit`,
      )
  }

  /** Writes the offer's state after an audit, logging a change. */
  private async followState(offer: Offer, audit: AuditRow): Promise<void> {
    const now = this.o.now()
    const since = now - AUDIT_HORIZON_MS
    const recent = await this.o.audits.conclusive(offer.provider, offer.modelId, since, AUDIT_WINDOW)
    const state: VerificationState = verificationOf(recent.map((a) => a.result as 'passed' | 'failed'))
    const counts = await this.o.audits.counts(offer.provider, offer.modelId, since)
    const before = (await this.o.audits.states()).find(
      (s) => s.provider === offer.provider && s.model === offer.modelId,
    )
    const next: OfferStateRow = {
      provider: offer.provider,
      model: offer.modelId,
      state,
      offerSignature: offer.signature,
      passed: counts.passed,
      failed: counts.failed,
      lastAuditAt: now,
      since: before && before.state === state ? before.since : now,
    }
    // Its earnings are held before it is quarantined in the store: a crash between the two leaves them held, never
    // a quarantine whose earnings a settlement pass could still pay.
    if (state === 'quarantined' && before?.state !== 'quarantined') await this.holdEarnings(offer, audit)
    await this.o.audits.setState(next)
    if (before?.state === 'quarantined' && state !== 'quarantined')
      await this.o.held.end(offer.provider, offer.modelId, now)
    // This gateway routes by it at once; the others at their next read of the store.
    this.o.catalog.applyStates(await this.o.audits.states())
    if (before?.state !== state && (before || state !== 'unverified'))
      this.o.log(
        `offer ${offer.key}: ${state} (audit ${audit.id} ${audit.result}${audit.reason ? `: ${audit.reason}` : ''})`,
      )
  }
}

/** The answer an audit compares: text, tokens with their log probabilities, finish. */
function answerOf(reply: Extract<AuditReply, { text: string }>): AuditAnswer {
  const tokens = reply.logprobs?.map(tokenOf)
  const usable = tokens && tokens.length > 0 && tokens.every((t) => t !== undefined)
  return { text: reply.text, finish: reply.finish, ...(usable ? { tokens: tokens as TokenChoice[] } : {}) }
}

function tokenOf(entry: unknown): TokenChoice | undefined {
  const e = (entry ?? {}) as { token?: unknown; logprob?: unknown; top_logprobs?: unknown }
  if (typeof e.token !== 'string' || typeof e.logprob !== 'number') return undefined
  const top: TokenChoice['top'] = []
  for (const t of Array.isArray(e.top_logprobs) ? (e.top_logprobs as unknown[]) : []) {
    const { token, logprob } = (t ?? {}) as { token?: unknown; logprob?: unknown }
    if (typeof token === 'string' && typeof logprob === 'number') top.push({ token, logprob })
  }
  return { token: e.token, logprob: e.logprob, top }
}
