import { readFile } from 'node:fs/promises'
import type { Command } from 'commander'
import { action, CliError, common, readConfig, type CommonOptions } from '../context.js'
import type { Config } from '../../config-schema.js'

interface VerifyOptions extends CommonOptions {
  baseUrl?: string
  rpcUrl?: string
  apiKey?: string
}

const MARK = { true: 'holds  ', false: 'FAILS  ', null: 'unknown' } as const

/** `svc receipt verify FILE`: checks a receipt as anyone can, from what the gateway publishes and the chain. */
export function receiptCommands(program: Command): void {
  const receipt = program.command('receipt').description('signed receipts of requests')
  common(
    receipt
      .command('verify')
      .argument('<file>', 'a receipt saved from GET /v1/usage/{id} or the portal (with its proof, if any)')
      .option(
        '--base-url <url>',
        "the gateway's address, for its published signers (default: $SVC_BASE_URL, else the config's listen address)",
      )
      .option(
        '--rpc-url <url>',
        "a node of the chain the receipt names, to read its batch's root (default: $SVC_RPC_URL, else the config's " +
          'evm rail)',
      )
      .option('--api-key <key>', 'fetch the proof from the gateway when the file has none (default: $SVC_API_KEY)'),
  )
    .description("check a receipt's signature, its leaf, its Merkle proof and the root on chain")
    .action(
      action(async (file: string, opts: VerifyOptions) => {
        const { parseReceiptFile, fetchSigners, fetchProof } = await import('../../receipts/fetch.js')
        const { verifyReceipt } = await import('../../receipts/verify.js')
        // The config is read only when named: a receipt is checked by anyone, most of whom run no gateway.
        const config = opts.config || process.env.SVC_CONFIG ? await readConfig(opts) : undefined
        const baseUrl = opts.baseUrl ?? process.env.SVC_BASE_URL ?? (config && gatewayUrl(config))
        if (!baseUrl)
          throw new CliError('--base-url (or SVC_BASE_URL, or --config): the gateway whose published signers to check')
        const text = await readFile(file, 'utf8')
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          throw new CliError(`${file} is not JSON: save the answer of GET /v1/usage/{id} or the portal's download`)
        }
        const parsed = parseReceiptFile(json)
        if (!parsed) throw new CliError(`${file} holds no signed receipt`)
        const notes: string[] = []
        const apiKey = opts.apiKey ?? process.env.SVC_API_KEY
        if (!parsed.proof && apiKey) {
          const proof = await fetchProof(baseUrl, apiKey, parsed.signed.receipt.request_id)
          if ('error' in proof) notes.push(`no proof: ${proof.error}`)
          else parsed.proof = proof
        }
        const rpcUrl =
          opts.rpcUrl ?? process.env.SVC_RPC_URL ?? (config?.rail.kind === 'evm' ? config.rail.rpcUrl : undefined)
        const chainId = parsed.signed.domain.chainId
        const chain =
          rpcUrl && chainId !== undefined
            ? (await import('../../chain/client.js')).publicClientFor(rpcUrl, Number(chainId))
            : undefined
        const verdict = await verifyReceipt({
          signed: parsed.signed,
          signers: await fetchSigners(baseUrl).catch((err: Error) => {
            const why = (err.cause as Error | undefined)?.message ?? err.message
            throw new CliError(`cannot read the published signers at ${baseUrl}: ${why}`)
          }),
          ...(parsed.proof ? { proof: parsed.proof } : {}),
          ...(chain ? { chain } : {}),
        })
        const id = parsed.signed.receipt.receipt_id
        if (opts.json) process.stdout.write(`${JSON.stringify({ receipt_id: id, ...verdict, notes })}\n`)
        else {
          const head = verdict.ok
            ? verdict.complete
              ? 'verified'
              : 'nothing fails, but not everything could be checked'
            : 'does NOT verify'
          const lines = [
            `receipt ${id}: ${head}`,
            ...verdict.checks.map((c) => `  ${MARK[`${c.ok}`]}  ${c.name}: ${c.detail}`),
          ]
          process.stdout.write(`${[...lines, ...notes.map((n) => `  ${n}`)].join('\n')}\n`)
        }
        if (!verdict.ok) process.exitCode = 1
      }),
    )
}

/** Where a config's gateway is reached: its portal's public origin, else its listen address (a wildcard: loopback). */
function gatewayUrl(config: Config): string {
  if (config.portal?.origin) return config.portal.origin
  const host = config.listen?.host ?? '127.0.0.1'
  const reachable = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '[::1]' : host
  const literal = reachable.includes(':') && !reachable.startsWith('[') ? `[${reachable}]` : reachable
  return `http://${literal}:${config.listen?.port ?? 8080}`
}
