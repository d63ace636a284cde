import type { Command } from 'commander'
import { issueKey, OperationError, requireAccount, setKeyLimits } from '../../accounts/operations.js'
import { limitsLine, limitsOf, limitsView, withLimits, type LimitOptions } from './key-limits.js'
import { action, common, emit, withStore, type CommonOptions } from '../context.js'

interface KeyOptions extends CommonOptions, LimitOptions {
  wallet: string
  name: string
  id?: string
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** `svc key create|list|update|revoke`. */
export function keyCommands(program: Command): void {
  const key = program.command('key').description('API keys of an account')
  common(
    withLimits(
      key
        .command('create')
        .requiredOption('--wallet <address>', 'wallet address')
        .option('--name <name>', 'a label', 'default'),
    ),
  )
    .description('create a key; it is printed once and stored only as a hash')
    .action(
      action(async (opts: KeyOptions) =>
        withStore(opts, async (store) => {
          const a = await requireAccount(store, opts.wallet)
          if (a.status !== 'active')
            throw new OperationError(`${a.address} is suspended; resume it before creating keys`)
          const limits = limitsOf(opts)
          const k = await issueKey({ store, accountId: a.id, name: opts.name, limits, now: Date.now() })
          const data = {
            id: k.id,
            api_key: k.key,
            prefix: k.prefix,
            name: k.name,
            wallet: a.address,
            ...limitsView(limits),
          }
          emit(opts, data, [`${k.key}`, `(key ${k.id} "${k.name}" for ${a.address}; shown once, store it now)`])
        }),
      ),
    )
  common(key.command('list').requiredOption('--wallet <address>', 'wallet address'))
    .description('list keys: prefix, name, created, last used, revoked')
    .action(
      action(async (opts: KeyOptions) =>
        withStore(opts, async (store) => {
          const a = await requireAccount(store, opts.wallet)
          const keys = await store.keys.list(a.id)
          const data = keys.map((k) => ({
            id: k.id,
            prefix: k.prefix,
            name: k.name,
            created: iso(k.createdAt),
            last_used: iso(k.lastUsedAt),
            revoked: iso(k.revokedAt),
            ...limitsView(k.limits),
          }))
          emit(
            opts,
            { wallet: a.address, keys: data },
            data.length
              ? data.map(
                  (k, i) =>
                    `${k.id}  ${k.prefix.padEnd(18)} ${k.name.padEnd(12)} created ${k.created}  last used ${k.last_used ?? 'never'}  ${limitsLine(keys[i]!.limits)}${k.revoked ? `  REVOKED ${k.revoked}` : ''}`,
                )
              : `no keys for ${a.address}`,
          )
        }),
      ),
    )
  common(
    withLimits(
      key
        .command('update')
        .requiredOption('--wallet <address>', 'wallet address')
        .requiredOption('--id <key_id>', 'key id from svc key list'),
    ),
  )
    .description(
      "change a key's limits (--rpm, --tpm, --limit, --limit-reset; none removes one); gateways apply it within keyCacheMs",
    )
    .action(
      action(async (opts: KeyOptions) =>
        withStore(opts, async (store) => {
          const a = await requireAccount(store, opts.wallet)
          const current = (await store.keys.list(a.id)).find((k) => k.id === opts.id && k.revokedAt === null)
          if (!current) throw new OperationError(`no live key ${opts.id} for ${a.address}`)
          const limits = limitsOf(opts, current.limits)
          await setKeyLimits(store, { accountId: a.id, keyId: opts.id! }, limits, Date.now())
          emit(opts, { id: opts.id, ...limitsView(limits) }, `${opts.id}: ${limitsLine(limits)}`)
        }),
      ),
    )
  common(
    key
      .command('revoke')
      .requiredOption('--wallet <address>', 'wallet address')
      .requiredOption('--id <key_id>', 'key id from svc key list'),
  )
    .description('revoke a key: requests with it get invalid_api_key')
    .action(
      action(async (opts: KeyOptions) =>
        withStore(opts, async (store) => {
          const a = await requireAccount(store, opts.wallet)
          if (!(await store.keys.revoke(a.id, opts.id!, Date.now())))
            throw new OperationError(`no live key ${opts.id} for ${a.address}`)
          emit(opts, { id: opts.id, revoked: true }, `revoked ${opts.id}`)
        }),
      ),
    )
}
