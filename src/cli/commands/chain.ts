import { readFileSync, writeFileSync } from 'node:fs'
import type { Command } from 'commander'
import type { Address } from 'viem'
import type { Config } from '../../config-schema.js'
import { normalizeWallet, OperationError } from '../../accounts/operations.js'
import type { EvmRailConfig } from '../../chain/client.js'
import { action, common, configPath, emit, readConfig, withStore, type CommonOptions } from '../context.js'

interface DeployOptions extends CommonOptions {
  rpcUrl?: string
  usdc?: string
  operator?: string
  keyEnv?: string
  write?: boolean
}

const addressOption = (name: string, v: string | undefined): Address | undefined => {
  if (v === undefined) return undefined
  // The same check as every --wallet: an address, and a valid EIP-55 checksum when mixed case.
  try {
    return normalizeWallet(v) as Address
  } catch (err) {
    throw new OperationError(`${name}: ${(err as Error).message}`)
  }
}

/** The config when one is named or the default exists; deploy works without one. */
async function optionalConfig(opts: CommonOptions): Promise<{ config: Config; path: string } | null> {
  try {
    return { config: await readConfig(opts), path: configPath(opts) }
  } catch (err) {
    if (err instanceof OperationError && !opts.config && !process.env.SVC_CONFIG) return null
    throw err
  }
}

/** `svc chain deploy` and `svc chain status`. */
export function chainCommands(program: Command): void {
  const chain = program.command('chain').description('on-chain settlement (evm rail): contracts and their state')

  common(chain.command('deploy'))
    .description('deploy the BatchSettler (and, on a local chain, a test USDC token)')
    .option('--rpc-url <url>', 'JSON-RPC endpoint (default: rail.rpcUrl of the config)')
    .option(
      '--usdc <address>',
      'token to settle in (default: Circle USDC on Base Sepolia; a new test token on local chains)',
    )
    .option('--operator <address>', 'the only address allowed to send batches (default: the deployer)')
    .option(
      '--key-env <name>',
      "environment variable with the deployer's key (default: rail.operatorKeyEnv, else SVC_OPERATOR_KEY)",
    )
    .option('--write', 'write the resulting evm rail into the config file')
    .action(
      action(async (opts: DeployOptions) => {
        // viem and the chain modules load only when a chain command runs.
        const { connect, KNOWN_USDC, LOCAL_CHAIN_IDS, operatorFromEnv } = await import('../../chain/client.js')
        const { deployRail, walletFor } = await import('../../chain/deploy.js')
        const { validateConfig } = await import('../../config.js')
        const found = await optionalConfig(opts)
        const current = found?.config.rail.kind === 'evm' ? found.config.rail : undefined
        const rpcUrl = opts.rpcUrl ?? current?.rpcUrl
        if (!rpcUrl) throw new OperationError('pass --rpc-url <url> (or a config whose rail is evm)')
        if (opts.write && !found) throw new OperationError('--write needs a config file: pass --config <file>')
        const keyEnv =
          opts.keyEnv ?? current?.operatorKeyEnv ?? (await import('../../chain/client.js')).DEFAULT_OPERATOR_KEY_ENV
        let deployer
        try {
          deployer = operatorFromEnv({ operatorKeyEnv: keyEnv })
        } catch (err) {
          throw new OperationError((err as Error).message)
        }
        const client = await connect(rpcUrl)
        const chainId = client.chain!.id
        let usdc = addressOption('--usdc', opts.usdc) ?? KNOWN_USDC[chainId]
        if (!usdc && !LOCAL_CHAIN_IDS.has(chainId))
          throw new OperationError(`no known USDC on chain ${chainId}: pass --usdc <address>`)
        const operator = addressOption('--operator', opts.operator)
        const d = await deployRail(client, walletFor(client, deployer), {
          ...(usdc ? { usdc } : {}),
          ...(operator ? { operator } : {}),
        })
        usdc = d.usdc
        const rail: EvmRailConfig = {
          ...current,
          kind: 'evm',
          rpcUrl,
          chainId,
          usdc,
          settler: d.settler,
          operatorKeyEnv: keyEnv,
          confirmations: current?.confirmations ?? (LOCAL_CHAIN_IDS.has(chainId) ? 1 : 2),
        }
        if (opts.write && found) {
          const raw = JSON.parse(readFileSync(found.path, 'utf8')) as Record<string, unknown>
          const next = { ...raw, rail }
          validateConfig(next, found.path)
          writeFileSync(found.path, `${JSON.stringify(next, null, 2)}\n`)
        }
        emit(
          opts,
          {
            chain_id: chainId,
            usdc,
            usdc_deployed: d.usdcDeployed,
            settler: d.settler,
            operator: d.operator,
            rail,
            written: opts.write ? found?.path : null,
          },
          [
            `chain ${chainId} at ${rpcUrl}`,
            `  USDC      ${usdc}${d.usdcDeployed ? '   (test token deployed now; its deployer may mint)' : ''}`,
            `  settler   ${d.settler}   (operator ${d.operator}; payers approve this address)`,
            opts.write ? `  rail written to ${found!.path}` : `  config rail: ${JSON.stringify(rail)}`,
          ],
        )
      }),
    )

  common(chain.command('status'))
    .description('addresses, operator balance, pending batches and debtors of the evm rail')
    .action(
      action(async (opts: CommonOptions) =>
        withStore(
          opts,
          async (store, config) => {
            if (config.rail.kind !== 'evm')
              throw new OperationError('the config settles on the local rail; svc chain status needs rail.kind "evm"')
            const { chainStatus } = await import('../../chain/status.js')
            const s = await chainStatus(config.rail, store)
            emit(opts, s, [
              `chain ${s.chain_id} at ${s.rpc_url}: head block ${s.head_block}, a wallet last read at block ${s.watcher_block ?? '(never)'}`,
              `  USDC            ${s.usdc.address} (${s.usdc.symbol ?? 'no token there'})`,
              `  settler         ${s.settler.address} ${s.settler.deployed ? `(operator ${s.settler.operator})` : '(not deployed)'}`,
              `  operator        ${s.operator ? `${s.operator.address}: ${s.operator.eth} ETH for gas (key from ${s.operator.key_env})` : 'unknown'}`,
              `  fee account     ${s.fee_account.address ?? '-'}: ${s.fee_account.usdc ?? '-'} USDC`,
              `  vendor account  ${s.vendor_account.address ?? '-'}: ${s.vendor_account.usdc ?? '-'} USDC`,
              `  batches         ${s.pending_batches.length} pending, ${s.settled_batches} settled`,
              ...s.pending_batches.map((b) => `    ${b.id} ${b.status} ${b.total} USDC ${b.tx_hash ?? ''}`),
              `  debtors         ${s.debtors.length ? s.debtors.map((d) => `${d.wallet} owes ${d.debt}`).join(', ') : 'none'}`,
              ...s.problems.map((p) => `  problem: ${p}`),
            ])
          },
          { create: true },
        ),
      ),
    )
}
