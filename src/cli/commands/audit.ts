import type { Command } from 'commander'
import { checksumAddress, isEvmAddress } from '../../protocol/address.js'
import type { AuditRow, OfferStateRow } from '../../store/audits.js'
import type { HeldEarnings, HeldStatus } from '../../store/held-earnings.js'
import type { Store } from '../../store/store.js'
import { auditFinding } from '../../audit/finding.js'
import { formatUsdc } from '../../money/usdc.js'
import { action, CliError, common, emit, wholeOption, withStore, type CommonOptions } from '../context.js'

interface ListOptions extends CommonOptions {
  model?: string
  provider?: string
  result?: string
  limit: string
}

interface DecideOptions extends CommonOptions {
  note?: string
}

interface HeldOptions extends CommonOptions {
  status?: string
}

const HELD_STATUSES: HeldStatus[] = ['held', 'released', 'forfeited']

/** Held earnings as `svc audit held|release|forfeit` print them: what they hold now, or what their decision did. */
async function heldView(store: Store, h: HeldEarnings) {
  const now = h.status === 'held' ? await store.heldEarnings.amount(h) : undefined
  return {
    id: h.id,
    model: h.model,
    provider: h.provider,
    status: h.status,
    since: when(h.fromAt),
    audit_id: h.auditId,
    created: when(h.createdAt),
    decided: h.decidedAt === null ? null : when(h.decidedAt),
    note: h.note,
    ...(now ? { held_charges: now.charges, held_usdc: formatUsdc(now.total) } : {}),
    ...(h.refunded !== null ? { refunded_charges: h.refundedCharges, refunded_usdc: formatUsdc(h.refunded) } : {}),
  }
}

const heldLine = (v: Awaited<ReturnType<typeof heldView>>) =>
  `${v.id}  ${v.model}  ${v.provider}  ${v.status}  since ${v.since}` +
  (v.held_usdc !== undefined ? `  ${v.held_usdc} USDC in ${v.held_charges} charges held` : '') +
  (v.refunded_usdc !== undefined ? `  ${v.refunded_usdc} USDC in ${v.refunded_charges} charges refunded` : '') +
  (v.note ? `  (${v.note})` : '')

interface RunOptions extends CommonOptions {
  model: string
  provider?: string
  prompt?: string
}

const RESULTS = ['passed', 'failed', 'inconclusive']

const when = (ms: number) => new Date(ms).toISOString()

/** An audit as `svc audit list|show` print it (and the JSON they emit). */
function auditView(a: AuditRow) {
  return {
    id: a.id,
    created: when(a.createdAt),
    model: a.model,
    provider: a.provider,
    prompt_id: a.promptId,
    result: a.result,
    reason: a.reason,
    request_id: a.requestId,
    evidence: a.evidence,
  }
}

function stateView(s: OfferStateRow) {
  return {
    model: s.model,
    provider: s.provider,
    state: s.state,
    audits_1d: { passed: s.passed, failed: s.failed },
    last_audit_at: when(s.lastAuditAt),
    since: when(s.since),
  }
}

const line = (a: AuditRow) =>
  `${a.id}  ${when(a.createdAt)}  ${a.model}  ${a.provider}  ${a.promptId}  ${a.result}${a.reason ? ` (${a.reason})` : ''}`

/** An audit's result and, unless it passed, where its reply left the reference. */
function finding(a: AuditRow): string {
  const gap = (a.evidence as { meanGap?: number }).meanGap ?? 0
  return a.result === 'passed' ? `passed: mean logprob gap ${gap} nats` : `${a.result}: ${auditFinding(a)}`
}

const addressOption = (text: string | undefined) => {
  if (text === undefined) return undefined
  if (!isEvmAddress(text)) throw new CliError(`--provider must be a provider address (0x…), got ${text}`)
  return checksumAddress(text)
}

/** `svc audit list|show|run|states`: the marketplace's audits of offers and the states they left. */
export function auditCommands(program: Command): void {
  const audit = program.command('audit').description("audits of providers' offers (see the README, Verified providers)")

  common(audit.command('list'))
    .option('--model <id>', 'only audits of this model')
    .option('--provider <address>', "only audits of this provider's offers")
    .option('--result <result>', `only audits with this result (${RESULTS.join(', ')})`)
    .option('--limit <n>', 'at most this many, newest first', '20')
    .description('audits, newest first')
    .action(
      action(async (o: ListOptions) =>
        withStore(o, async (store) => {
          if (o.result !== undefined && !RESULTS.includes(o.result))
            throw new CliError(`--result must be one of ${RESULTS.join(', ')}, got ${o.result}`)
          const provider = addressOption(o.provider)
          const rows = await store.audits.list({
            ...(o.model ? { model: o.model } : {}),
            ...(provider ? { provider } : {}),
            ...(o.result ? { result: o.result } : {}),
            limit: Math.max(1, wholeOption('--limit', o.limit, 1000)),
          })
          emit(o, { audits: rows.map(auditView) }, rows.length ? rows.map(line) : 'no audits')
        }),
      ),
    )

  common(audit.command('show').argument('<id>', 'an audit id (aud_…) from svc audit list'))
    .description('one audit: its prompt, result and evidence (where the reply left the reference)')
    .action(
      action(async (id: string, o: CommonOptions) =>
        withStore(o, async (store) => {
          const a = await store.audits.get(id)
          if (!a) throw new CliError(`no audit ${id}`)
          emit(o, auditView(a), [line(a), finding(a), ...(a.requestId ? [`request ${a.requestId}`] : [])])
        }),
      ),
    )

  common(audit.command('states'))
    .description("each audited offer's verification state and its audits of the last day")
    .action(
      action(async (o: CommonOptions) =>
        withStore(o, async (store) => {
          const states = (await store.audits.states()).map(stateView)
          emit(
            o,
            { states },
            states.length
              ? states.map(
                  (s) =>
                    `${s.model}  ${s.provider}  ${s.state.padEnd(11)}  passed ${s.audits_1d.passed}, failed ${s.audits_1d.failed} (1d)  since ${s.since}`,
                )
              : 'no offer audited yet',
          )
        }),
      ),
    )

  common(audit.command('held'))
    .option('--status <status>', `only these (${HELD_STATUSES.join(', ')})`)
    .description("quarantined offers' earnings held back from settlement, and the decisions on them")
    .action(
      action(async (o: HeldOptions) =>
        withStore(o, async (store) => {
          if (o.status !== undefined && !HELD_STATUSES.includes(o.status as HeldStatus))
            throw new CliError(`--status must be one of ${HELD_STATUSES.join(', ')}, got ${o.status}`)
          const held = await Promise.all(
            (await store.heldEarnings.list(o.status as HeldStatus | undefined)).map((h) => heldView(store, h)),
          )
          emit(o, { held }, held.length ? held.map(heldLine) : 'no earnings held')
        }),
      ),
    )

  const decide = (name: 'release' | 'forfeit', description: string) =>
    common(audit.command(name).argument('<id>', 'held earnings (held_…) from svc audit held'))
      .option('--note <text>', 'why, kept with the decision')
      .description(description)
      .action(
        action(async (id: string, o: DecideOptions) =>
          withStore(o, async (store) => {
            const h = await store.heldEarnings.get(id)
            if (!h) throw new CliError(`no held earnings ${id}`)
            if (h.status !== 'held') throw new CliError(`${id} was ${h.status} already, ${when(h.decidedAt!)}`)
            const before = await store.heldEarnings.amount(h)
            const now = Date.now()
            const note = o.note ?? null
            if (name === 'release') {
              if (!(await store.heldEarnings.release(id, now, note))) throw new CliError(`${id} is no longer held`)
            } else if (!(await store.heldEarnings.forfeit(id, now, note))) throw new CliError(`${id} is no longer held`)
            const v = await heldView(store, (await store.heldEarnings.get(id))!)
            const what =
              name === 'release'
                ? `released: ${formatUsdc(before.total)} USDC in ${before.charges} charges are due to ${h.provider} in the next settlement batch`
                : `forfeited: ${v.refunded_usdc} USDC in ${v.refunded_charges} charges refunded to their payers`
            emit(o, v, `${id} ${what}`)
          }),
        ),
      )
  decide('release', 'release held earnings: their charges are paid in the next settlement batch')
  decide('forfeit', 'forfeit held earnings: each held charge is refunded to its payer and never paid out')

  common(audit.command('run'))
    .requiredOption('--model <id>', 'audit the offers of this model')
    .option('--provider <address>', "only this provider's offer")
    .option('--prompt <id>', 'this prompt of the pool (default: one at random)')
    .description('audit offers now, through a gateway instance of this config, paid by the audit account')
    .action(
      action(async (o: RunOptions) =>
        withStore(o, async (store, config) => {
          if (!config.audit)
            throw new CliError('the config has no audit section: set audit.wallet and audit.references')
          const provider = addressOption(o.provider)
          const { Gateway } = await import('../../gateway/gateway.js')
          const gw = await Gateway.start({ ...config, audit: { ...config.audit, intervalMs: 0 } }, store, {
            log: () => {},
          })
          try {
            const auditor = gw.auditor!
            if (o.prompt !== undefined && !auditor.hasPrompt(o.prompt))
              throw new CliError(`no audit prompt ${o.prompt} (the built-in pool and audit.prompts)`)
            const offers = auditor
              .auditable()
              .filter((x) => x.modelId === o.model && (!provider || x.provider === provider))
            if (offers.length === 0)
              throw new CliError(
                `no offer of ${o.model}${provider ? ` by ${provider}` : ''} to audit (a model needs a reference in audit.references, and the reference is not audited)`,
              )
            if (!o.json) process.stderr.write(`auditing ${offers.map((x) => x.key).join(', ')} …\n`)
            const done = await auditor.auditHolding(offers, o.prompt)
            if (!done)
              throw new CliError(
                'a gateway is auditing right now (it holds the audit lock): try again in a few seconds',
              )
            const states = new Map((await store.audits.states()).map((s) => [`${s.provider}|${s.model}`, s.state]))
            emit(
              o,
              {
                audits: done.map((a) => ({ ...auditView(a), state: states.get(`${a.provider}|${a.model}`) })),
              },
              done.map((a) => `${line(a)}\n  ${finding(a)}; now ${states.get(`${a.provider}|${a.model}`)}`),
            )
            if (done.some((a) => a.result === 'failed')) process.exitCode = 1
          } finally {
            await gw.close()
          }
        }),
      ),
    )
}
