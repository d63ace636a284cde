import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Command } from 'commander'
import { SimulatedProvider } from '../../providers/simulated/server.js'
import { DEMO_SIM_MODELS, DEMO_WALLET, demoConfig } from '../demo/market.js'
import { REAL_MODEL_ID, startRealModel } from '../demo/real-model.js'
import { OperationError } from '../../accounts/operations.js'
import { formatUsdc, parseUsdc } from '../../money/usdc.js'
import { spendableOf } from '../../money/spendable.js'
import type { AnvilDemo } from '../demo/anvil.js'
import { action, noConfig, DEFAULT_DATA_DIR, emit, onShutdown, type CommonOptions } from '../context.js'
import { demoAccount, demoKey, demoPort } from '../demo/restart.js'
import { STORE_URL } from '../../config-schema.js'
import { applyGatewayV8Settings, noteMissingNodeFlags } from '../node-flags.js'
import { demoReceiptKey, demoSecretsKey } from '../demo/receipt-key.js'

const FUNDS = parseUsdc('25')!
const CAP = parseUsdc('20')!

interface DemoOptions extends CommonOptions {
  port?: string
  data: string
  chunkDelayMs: string
  rail: string
  /** Commander's `--no-real-model`: false when given. */
  realModel: boolean
}

/**
 * One line of Node that pays for a chat completion with the x402 client packages: the local chain's token is no asset
 * they know, so the client allows it by name.
 */
function x402Example(o: { baseUrl: string; usdc: string; chainId: number; key: string }): string {
  const network = `eip155:${o.chainId}`
  const body = `JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 64 })`
  return (
    `X402_KEY=${o.key} node --input-type=module -e "import { wrapFetchWithPaymentFromConfig } from '@x402/fetch'; ` +
    `import { ExactEvmScheme } from '@x402/evm'; import { privateKeyToAccount } from 'viem/accounts'; ` +
    `const pay = wrapFetchWithPaymentFromConfig(fetch, { schemes: [{ network: '${network}', client: new ExactEvmScheme(privateKeyToAccount(process.env.X402_KEY)) }], ` +
    `spendControls: { allowedAssets: [{ network: '${network}', asset: '${o.usdc}' }] } }); ` +
    `const r = await pay('${o.baseUrl}/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: ${body} }); ` +
    `console.log(r.status, r.headers.get('payment-response') && 'paid', (await r.json()).choices?.[0]?.message.content)"`
  )
}

/**
 * `svc demo`: embedded store (or DATABASE_URL's), simulated providers and vendor, a demo wallet funded at its first
 * start and its key; settled in the ledger (`--rail local`) or in test USDC on a local anvil chain (`--rail anvil`).
 */
export function demoCommand(program: Command): void {
  noConfig(program.command('demo'))
    .description('start the embedded demo marketplace (what npm start runs)')
    .option(
      '--port <n>',
      "gateway port (default: PORT, else the data directory's last port, else 8080; 0 picks a free one)",
    )
    .option('--data <dir>', 'directory for the database and the written config', DEFAULT_DATA_DIR)
    .option('--chunk-delay-ms <n>', 'pause between streamed tokens of the simulated providers', '15')
    .option('--rail <kind>', 'local (settled in the ledger) or anvil (test USDC on a local chain)', 'local')
    .option('--no-real-model', 'leave out the real model served by node-llama-cpp (when engines/ has it installed)')
    .action(
      action(async (opts: DemoOptions) => {
        const data = resolve(opts.data)
        const configFile = join(data, 'config.json')
        const { port, previous } = demoPort(opts.port, process.env, configFile)
        const databaseUrl = process.env.DATABASE_URL
        if (databaseUrl && !STORE_URL.test(databaseUrl))
          throw new OperationError(`DATABASE_URL must start with sqlite: or postgres://, got ${databaseUrl}`)
        if (databaseUrl && opts.rail === 'anvil')
          throw new OperationError(
            'DATABASE_URL is not used with --rail anvil: its store belongs to the chain it starts; unset it',
          )
        if (opts.rail !== 'local' && opts.rail !== 'anvil')
          throw new OperationError(`--rail must be local or anvil, got ${opts.rail}`)
        if (!/^\d{1,6}$/.test(opts.chunkDelayMs))
          throw new OperationError(`--chunk-delay-ms must be a whole number of milliseconds, got ${opts.chunkDelayMs}`)
        // After the options' own errors, which are the line to read when there are any.
        noteMissingNodeFlags()
        applyGatewayV8Settings()
        mkdirSync(data, { recursive: true })
        // Until it can stop gently, a signal ends the demo at once, through process exit (which stops an anvil it
        // started).
        const early = (signal: NodeJS.Signals) => process.exit(signal === 'SIGINT' ? 130 : 143)
        process.once('SIGINT', early).once('SIGTERM', early)
        // The chain (viem, anvil) loads only for --rail anvil.
        const anvil = opts.rail === 'anvil' ? await import('../demo/anvil.js') : undefined
        const chain: AnvilDemo | undefined = anvil ? await anvil.startAnvilDemo(data, FUNDS, CAP) : undefined
        const sim = { chunkDelayMs: Number(opts.chunkDelayMs), replyTokens: 24, models: DEMO_SIM_MODELS }
        const sims = await Promise.all([0, 1, 2, 3, 4].map(() => SimulatedProvider.start(sim)))
        const [a, b, c, d, vendor] = sims as [
          SimulatedProvider,
          SimulatedProvider,
          SimulatedProvider,
          SimulatedProvider,
          SimulatedProvider,
        ]
        const storeUrl = chain?.storeUrl ?? databaseUrl ?? `sqlite:${join(data, 'svc.db')}`
        const config = demoConfig({ providers: [a.url, b.url, c.url, d.url], vendor: vendor.url }, storeUrl, port)
        const real = opts.realModel ? await startRealModel(data) : undefined
        if (real?.added) {
          config.models.push(real.model)
          config.providers.push(real.provider)
        }
        const closeReal = async () => {
          if (real?.added) await real.close()
        }
        if (chain) config.rail = chain.rail
        config.receipts = { keyFile: demoReceiptKey(data) }
        config.secrets = { keyFile: demoSecretsKey(data) }
        const { startServer } = await import('../../server.js')
        let server
        try {
          server = await startServer(config)
        } catch (err) {
          await Promise.all(sims.map((s) => s.close()))
          await closeReal()
          await chain?.anvil.close()
          if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE')
            throw new OperationError(
              `port ${port} is in use; choose another with --port (npm start -- --port ${port + 1})`,
            )
          throw err
        }
        // Written once the gateway listens: a demo that could not start leaves a running one's config as it was. It
        // names the port listened on (`--port 0`'s pick too), where the other commands find this gateway.
        const listen = { ...config.listen, port: Number(new URL(server.url).port) }
        writeFileSync(configFile, `${JSON.stringify({ ...config, listen }, null, 2)}\n`)
        const { store } = server
        const { accountId, created } = await demoAccount(
          store,
          DEMO_WALLET,
          anvil ? undefined : { deposit: FUNDS, cap: CAP },
        )
        if (anvil) {
          // On chain the wallet was funded and approved above; the watcher reads it into the ledger.
          const { EvmRail } = await import('../../settlement/evm-rail.js')
          if (server.rail instanceof EvmRail) await server.rail.watcher.syncNow()
        }
        const funded = (await store.accounts.byId(accountId))!
        const key = await demoKey(store, accountId, data)
        const baseUrl = server.url
        const portalUrl = `${baseUrl}/portal`
        process.off('SIGINT', early).off('SIGTERM', early)
        onShutdown(async () => {
          await server.close()
          await Promise.all(sims.map((s) => s.close()))
          await closeReal()
          await chain?.anvil.close()
        })
        const chainJson = chain
          ? {
              chain: {
                rpc_url: chain.anvil.rpcUrl,
                chain_id: chain.anvil.chainId,
                usdc: chain.rail.usdc,
                settler: chain.rail.settler,
                x402_payer: anvil!.x402PayerAddress(),
                x402_payer_key: anvil!.x402PayerKey(),
              },
            }
          : {}
        const realJson = real?.added ? { real_model: { id: REAL_MODEL_ID, engine_url: real.url } } : {}
        emit(
          opts,
          { base_url: baseUrl, portal_url: portalUrl, api_key: key.key, config: configFile, ...chainJson, ...realJson },
          [
            'svc marketplace demo is running (Ctrl-C stops it)',
            '',
            `  base URL   ${baseUrl}   (OpenAI SDK baseURL: ${baseUrl}/v1)`,
            `  portal     ${portalUrl}`,
            `  API key    ${key.key}`,
            key.reused
              ? `             the demo's key of earlier starts (kept in ${join(data, 'demo-key')}; the store has only its hash)`
              : `             kept in ${join(data, 'demo-key')} for the next start; the store has only its hash`,
            `  wallet     ${DEMO_WALLET}: balance ${formatUsdc(funded.balance)} USDC, approved cap ${formatUsdc(funded.cap)}, spendable ${formatUsdc(spendableOf(funded))}`,
            ...(created || anvil
              ? []
              : ['             as earlier starts left it (not topped up; delete the data directory to start over)']),
            ...(previous !== undefined
              ? [`  port       ${port}, asked for; this data directory's config had ${previous}, now ${port}`]
              : []),
            `  config     ${configFile}   (svc account/key/usage/settle commands use it)`,
            ...(chain
              ? [
                  `  chain      anvil ${chain.anvil.rpcUrl} (chain ${chain.anvil.chainId}, 1 s blocks): test USDC ${chain.rail.usdc}`,
                  `             settler ${chain.rail.settler}: wallets approve it; batches settle every 30 s`,
                  `             svc settle needs the operator key: export ${anvil!.DEMO_OPERATOR_KEY_ENV}=${anvil!.demoOperatorKey()}`,
                ]
              : []),
            `  models     svc/atlas@1 (tools), svc/tern@2 (tools, limited), svc/wren@1 (small context), svc/cortex@1 (routing), svc/loom-embed@1 (embeddings)`,
            ...(real?.added
              ? [
                  `             ${REAL_MODEL_ID}: a real GGUF model served by node-llama-cpp at ${real.url}, metered in its own tokens`,
                ]
              : real
                ? [`             (${real.why})`]
                : []),
            '',
            'Try it:',
            `  curl ${baseUrl}/v1/chat/completions \\`,
            `    -H "Authorization: Bearer ${key.key}" -H "Content-Type: application/json" \\`,
            `    -d '{"model":"svc/atlas@1","messages":[{"role":"user","content":"Hello!"}],"max_tokens":64}'`,
            '',
            `  OPENAI_BASE_URL=${baseUrl}/v1 OPENAI_API_KEY=${key.key} node --input-type=module -e \\`,
            `    "import OpenAI from 'openai'; const r = await new OpenAI().chat.completions.create({ model: 'svc/cortex@1', messages: [{ role: 'user', content: 'Hello!' }] }); console.log(r.choices[0].message.content, r.svc)"`,
            ...(chain && anvil
              ? [
                  '',
                  `Pay per request with x402, no key (wallet ${anvil.x402PayerAddress()} holds test USDC; npm i @x402/fetch @x402/evm viem):`,
                  `  ${x402Example({ baseUrl, usdc: chain.rail.usdc, chainId: chain.anvil.chainId, key: anvil.x402PayerKey() })}`,
                ]
              : []),
          ],
        )
      }),
    )
}
