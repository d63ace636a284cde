import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Command } from 'commander'
import { SimulatedProvider } from '../../providers/simulated/server.js'
import { DEMO_SIM_MODELS, DEMO_WALLET, demoConfig } from '../../demo/market.js'
import { depositTo, issueKey, openAccount, OperationError } from '../../accounts/operations.js'
import { formatUsdc, parseUsdc } from '../../ledger/money.js'
import { spendableOf } from '../../ledger/spendable.js'
import { action, common, DEFAULT_DATA_DIR, emit, onShutdown, type CommonOptions } from '../context.js'

const FUNDS = parseUsdc('25')!
const CAP = parseUsdc('20')!

interface DemoOptions extends CommonOptions {
  port: string
  data: string
  chunkDelayMs: string
}

/** `svc demo`: embedded store, local rail, simulated providers and vendor, a funded demo wallet and a new key. */
export function demoCommand(program: Command): void {
  common(program.command('demo'))
    .description('start the embedded demo marketplace (what npm start runs)')
    .option('--port <n>', 'gateway port (0 picks a free one)', '8080')
    .option('--data <dir>', 'directory for the database and the written config', DEFAULT_DATA_DIR)
    .option('--chunk-delay-ms <n>', 'pause between streamed tokens of the simulated providers', '15')
    .action(action(async (opts: DemoOptions) => {
      const port = Number(opts.port)
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new OperationError(`--port must be a port number, got ${opts.port}`)
      const data = resolve(opts.data)
      mkdirSync(data, { recursive: true })
      const sim = { chunkDelayMs: Number(opts.chunkDelayMs) || 0, replyTokens: 24, models: DEMO_SIM_MODELS }
      const sims = await Promise.all([0, 1, 2, 3, 4].map(() => SimulatedProvider.start(sim)))
      const [a, b, c, d, vendor] = sims as [SimulatedProvider, SimulatedProvider, SimulatedProvider, SimulatedProvider, SimulatedProvider]
      const config = demoConfig({ providers: [a.url, b.url, c.url, d.url], vendor: vendor.url }, `sqlite:${join(data, 'svc.db')}`, port)
      const configFile = join(data, 'config.json')
      writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`)
      const { startServer } = await import('../../server.js')
      let server
      try {
        server = await startServer(config)
      } catch (err) {
        await Promise.all(sims.map((s) => s.close()))
        if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new OperationError(`port ${port} is in use; choose another with: npm start -- --port 8081`)
        throw err
      }
      const { store } = server
      const { account } = await openAccount(store, DEMO_WALLET)
      const current = (await store.accounts.byId(account.id))!
      if (current.balance < FUNDS) await depositTo(store, account.id, FUNDS - current.balance)
      await store.accounts.approve(account.id, CAP)
      const funded = (await store.accounts.byId(account.id))!
      const key = await issueKey(store, account.id, 'demo')
      const baseUrl = server.url
      const portalUrl = `${baseUrl}/portal`
      onShutdown(async () => {
        await server.close()
        await Promise.all(sims.map((s) => s.close()))
      })
      emit(opts, { base_url: baseUrl, portal_url: portalUrl, api_key: key.key, config: configFile }, [
        'svc marketplace demo is running (Ctrl-C stops it)',
        '',
        `  base URL   ${baseUrl}   (OpenAI SDK baseURL: ${baseUrl}/v1)`,
        `  portal     ${portalUrl}`,
        `  API key    ${key.key}`,
        '             shown once: it is stored only as a hash',
        `  wallet     ${DEMO_WALLET}: balance ${formatUsdc(funded.balance)} USDC, approved cap ${formatUsdc(funded.cap)}, spendable ${formatUsdc(spendableOf(funded))}`,
        `  config     ${configFile}   (svc account/key/usage/settle commands use it)`,
        `  models     svc/atlas@1 (tools), svc/tern@2 (tools, limited), svc/wren@1 (small context), svc/cortex@1 (routing)`,
        '',
        'Try it:',
        `  curl ${baseUrl}/v1/chat/completions \\`,
        `    -H "Authorization: Bearer ${key.key}" -H "Content-Type: application/json" \\`,
        `    -d '{"model":"svc/atlas@1","messages":[{"role":"user","content":"Hello!"}],"max_tokens":64}'`,
        '',
        `  OPENAI_BASE_URL=${baseUrl}/v1 OPENAI_API_KEY=${key.key} node --input-type=module -e \\`,
        `    "import OpenAI from 'openai'; const r = await new OpenAI().chat.completions.create({ model: 'svc/cortex@1', messages: [{ role: 'user', content: 'Hello!' }] }); console.log(r.choices[0].message.content, r.svc)"`,
      ])
    }))
}
