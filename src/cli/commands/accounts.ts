import type { Command } from 'commander'
import {
  approveCap,
  depositTo,
  normalizeWallet,
  openAccount,
  OperationError,
  requireAccount,
} from '../../accounts/operations.js'
import { formatUsdc, parseUsdc } from '../../money/usdc.js'
import type { Account } from '../../store/accounts.js'
import { spendableOf } from '../../money/spendable.js'
import type { Store } from '../../store/store.js'
import { action, common, emit, withStore, type CommonOptions } from '../context.js'

interface WalletOptions extends CommonOptions {
  wallet: string
}
interface AmountOptions extends WalletOptions {
  amount: string
}

function amountOf(text: string): bigint {
  const units = parseUsdc(text)
  if (units === null)
    throw new OperationError(`--amount must be a positive USDC amount with at most 6 decimals (e.g. 12.5), got ${text}`)
  return units
}

export async function accountView(store: Store, a: Account) {
  const view = {
    wallet: a.address,
    kind: a.kind,
    status: a.status,
    balance: formatUsdc(a.balance),
    approved_cap: formatUsdc(a.cap),
    held: formatUsdc(a.held),
    spendable: formatUsdc(spendableOf(a)),
    debt: formatUsdc(a.debt),
    open_holds: await store.ledger.openHolds(a.id),
    keys: (await store.keys.list(a.id)).filter((k) => k.revokedAt === null).length,
  }
  // A user's wallet may also be a provider's (listed in providers[] after its account was created): what it earned
  // shows.
  const t = await store.settlement.payeeTotals(a.id)
  if (a.kind === 'user' && t.pending === 0n && t.settled === 0n) return view
  return { ...view, earned_pending: formatUsdc(t.pending), earned_settled: formatUsdc(t.settled) }
}

function viewLines(v: Awaited<ReturnType<typeof accountView>>): string[] {
  return Object.entries(v).map(([k, val]) => `${k.padEnd(15)} ${String(val)}`)
}

/** `svc account create|show|suspend|resume`, `svc deposit`, `svc approve`. */
export function accountCommands(program: Command): void {
  const account = program.command('account').description('accounts bound to wallet addresses')
  common(account.command('create').requiredOption('--wallet <address>', 'wallet address (0x…)'))
    .description('create the account of a wallet (no-op when it exists)')
    .action(
      action(async (opts: WalletOptions) =>
        withStore(
          opts,
          async (store) => {
            const { account: a, created } = await openAccount(store, opts.wallet, Date.now())
            emit(
              opts,
              { created, ...(await accountView(store, a)) },
              `${created ? 'created' : 'exists'}: account ${a.address}`,
            )
          },
          { create: true },
        ),
      ),
    )
  common(account.command('show').requiredOption('--wallet <address>', 'wallet address'))
    .description('balance, approved cap, holds and spendable amount of an account')
    .action(
      action(async (opts: WalletOptions) =>
        withStore(opts, async (store) => {
          const v = await accountView(store, await requireAccount(store, opts.wallet))
          emit(opts, v, viewLines(v))
        }),
      ),
    )
  for (const [name, status] of [
    ['suspend', 'suspended'],
    ['resume', 'active'],
  ] as const) {
    common(account.command(name).requiredOption('--wallet <address>', 'wallet address'))
      .description(name === 'suspend' ? 'suspend an account: its keys get account_suspended' : 'lift a suspension')
      .action(
        action(async (opts: WalletOptions) =>
          withStore(opts, async (store) => {
            const a = await requireAccount(store, opts.wallet)
            await store.accounts.setStatus(a.id, status)
            emit(opts, { wallet: a.address, status }, `${a.address} is now ${status}`)
          }),
        ),
      )
  }
  common(
    program
      .command('deposit')
      .requiredOption('--wallet <address>', 'wallet address')
      .requiredOption('--amount <usdc>', 'USDC, e.g. 12.5'),
  )
    .description('credit test USDC to an account (local rail)')
    .action(
      action(async (opts: AmountOptions) =>
        withStore(
          opts,
          async (store, config) => {
            if (config.rail.kind === 'evm')
              throw new OperationError(
                "on the evm rail the balance is the wallet's USDC on chain: send test USDC to the wallet instead",
              )
            const amount = amountOf(opts.amount)
            const { account: a } = await openAccount(store, normalizeWallet(opts.wallet), Date.now())
            const after = await depositTo(store, a.id, amount, Date.now())
            emit(
              opts,
              {
                wallet: a.address,
                deposited: formatUsdc(amount),
                balance: formatUsdc(after.balance),
                spendable: formatUsdc(spendableOf(after)),
              },
              `deposited ${formatUsdc(amount)} USDC to ${a.address}; balance ${formatUsdc(after.balance)}, spendable ${formatUsdc(spendableOf(after))}`,
            )
          },
          { create: true },
        ),
      ),
    )
  common(
    program
      .command('approve')
      .requiredOption('--wallet <address>', 'wallet address')
      .requiredOption('--amount <usdc>', 'USDC, e.g. 10'),
  )
    .description('set the approved spending cap of an account (like an ERC-20 allowance)')
    .action(
      action(async (opts: AmountOptions) =>
        withStore(opts, async (store, config) => {
          if (config.rail.kind === 'evm')
            throw new OperationError(
              `on the evm rail the cap is the wallet's USDC allowance: approve the settler ${config.rail.settler} from the wallet`,
            )
          const cap = amountOf(opts.amount)
          const a = await requireAccount(store, opts.wallet)
          await approveCap(store, a.id, cap)
          const after = (await store.accounts.byId(a.id))!
          emit(
            opts,
            { wallet: a.address, approved_cap: formatUsdc(cap), spendable: formatUsdc(spendableOf(after)) },
            `approved cap of ${a.address} is ${formatUsdc(cap)} USDC; spendable ${formatUsdc(spendableOf(after))}`,
          )
        }),
      ),
    )
}
