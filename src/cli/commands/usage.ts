import type { Command } from 'commander'
import { OperationError, requireAccount } from '../../accounts/operations.js'
import { formatUsdc } from '../../money/usdc.js'
import { wireUsage } from '../../usage/wire.js'
import { Settler } from '../../settlement/settler.js'
import { makeRail } from '../../settlement/rails.js'
import { action, common, emit, withStore, type CommonOptions } from '../context.js'
import { countFrom } from '../../protocol/counts.js'

/** Most rows `svc usage` prints at once. */
const MAX_ROWS = 10_000

interface UsageOptions extends CommonOptions {
  wallet: string
  limit: string
  model?: string
}

/** `svc usage` and `svc settle`. */
export function usageCommands(program: Command): void {
  common(
    program
      .command('usage')
      .requiredOption('--wallet <address>', 'wallet address')
      .option('--limit <n>', 'rows', '20')
      .option('--model <id>', 'only this model'),
  )
    .description('recent requests of an account, newest first, with tokens, cost and outcome')
    .action(
      action(async (opts: UsageOptions) =>
        withStore(opts, async (store) => {
          const limit = countFrom(opts.limit, MAX_ROWS)
          if (limit === null) throw new OperationError(`--limit must be a whole number from 1 to ${MAX_ROWS}`)
          const a = await requireAccount(store, opts.wallet)
          const rows = await store.usage.list(a.id, { limit, ...(opts.model ? { model: opts.model } : {}) })
          const total = rows.reduce((s, r) => s + r.cost, 0n)
          emit(
            opts,
            { wallet: a.address, data: rows.map(wireUsage), total_cost_usdc: formatUsdc(total) },
            rows.length
              ? [
                  ...rows.map(
                    (r) =>
                      `${new Date(r.createdAt).toISOString()}  ${r.requestId}  ${r.model.padEnd(14)} ${r.outcome.padEnd(18)} ${String(r.promptTokens).padStart(6)}+${String(r.completionTokens).padEnd(6)} ${formatUsdc(r.cost)} USDC`,
                  ),
                  `total ${formatUsdc(total)} USDC over ${rows.length} request(s)`,
                ]
              : `no requests for ${a.address}`,
          )
        }),
      ),
    )
  common(program.command('settle'))
    .description('run one settlement pass: batch captured charges and pay them on the rail')
    .action(
      action(async (opts: CommonOptions) =>
        withStore(opts, async (store, config) => {
          const rail = await makeRail(config, store)
          const report = await new Settler(store, rail).runOnce().finally(() => rail.close?.())
          const batches = report.batches.map((b) => ({ id: b.id, total: formatUsdc(b.total), legs: b.legs }))
          const addresses = async (ids: number[]) =>
            Promise.all(ids.map(async (id) => (await store.accounts.byId(id))?.address ?? String(id)))
          const waiting = {
            payees: await addresses(report.waiting.payees),
            payers: await addresses(report.waiting.payers),
          }
          const refused = [...waiting.payees.map((a) => `payee ${a}`), ...waiting.payers.map((a) => `payer ${a}`)]
          emit(
            opts,
            { ran: report.ran, batches, waiting, unfinished: report.unfinished },
            !report.ran
              ? 'another settler holds the lock; nothing done'
              : [
                  ...(batches.length
                    ? batches.map((b) => `settled ${b.id}: ${b.total} USDC in ${b.legs} leg(s)`)
                    : ['nothing to settle']),
                  ...refused.map((r) => `waiting: the token refuses ${r}; its charges stay unsettled`),
                  ...report.unfinished.map((u) => `not settled ${u.id}: ${u.why}`),
                ],
          )
        }),
      ),
    )
}
