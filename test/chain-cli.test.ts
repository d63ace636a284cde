import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { anvilAccount, anvilKey, startAnvil, type Anvil } from '../src/chain/anvil.js'
import { demoConfig } from '../src/cli/demo/market.js'
import { chat } from './helpers/market.js'
import { hasAnvil } from './helpers/chain.js'

const CLI = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js')
const run = promisify(execFile)
const svc = async (args: string[], env: NodeJS.ProcessEnv = {}) =>
  JSON.parse((await run('node', [CLI, ...args, '--json'], { env: { ...process.env, ...env } })).stdout)

/** The chain commands as a user runs them: the built `svc` against a local anvil (run `npx tsc -p .` first). */
describe.skipIf(!hasAnvil)('svc chain commands (anvil)', () => {
  let anvil: Anvil
  let dir: string

  beforeAll(async () => {
    anvil = await startAnvil()
    dir = mkdtempSync(join(tmpdir(), 'svc-chain-cli-'))
  })
  afterAll(() => anvil?.close())

  it('deploys the token and the settler, writes the rail into the config, and reports it', async () => {
    const file = join(dir, 'config.json')
    const urls = [
      'http://127.0.0.1:1/v1',
      'http://127.0.0.1:2/v1',
      'http://127.0.0.1:3/v1',
      'http://127.0.0.1:4/v1',
    ] as const
    writeFileSync(
      file,
      JSON.stringify(
        demoConfig({ providers: [...urls], vendor: 'http://127.0.0.1:5/v1' }, `sqlite:${join(dir, 'svc.db')}`, 0),
      ),
    )
    const env = { SVC_OPERATOR_KEY: anvilKey(9) }
    const out = await svc(['chain', 'deploy', '--config', file, '--rpc-url', anvil.rpcUrl, '--write'], env)
    expect(out).toMatchObject({
      chain_id: 31337,
      usdc_deployed: true,
      operator: anvilAccount(9).address,
      written: file,
    })
    const rail = JSON.parse(readFileSync(file, 'utf8')).rail
    expect(rail).toMatchObject({
      kind: 'evm',
      rpcUrl: anvil.rpcUrl,
      chainId: 31337,
      usdc: out.usdc,
      settler: out.settler,
      operatorKeyEnv: 'SVC_OPERATOR_KEY',
    })

    const status = await svc(['chain', 'status', '--config', file], env)
    expect(status).toMatchObject({
      chain_id: 31337,
      usdc: { address: out.usdc, symbol: 'USDC' },
      settler: { address: out.settler, deployed: true, operator: anvilAccount(9).address },
      fee_account: { address: anvilAccount(9).address, usdc: '0.000000' },
      pending_batches: [],
      debtors: [],
      problems: [],
    })
    // Without the operator's key it says so, on one line.
    const keyless = await svc(['chain', 'status', '--config', file], { SVC_OPERATOR_KEY: '' })
    expect(keyless.problems).toHaveLength(1)
    expect(keyless.problems[0]).toMatch(/SVC_OPERATOR_KEY/)
    expect(keyless.problems[0]).not.toContain('\n')
    // A ledger deposit makes no sense when the balance is the wallet's.
    const refused = await run('node', [
      CLI,
      'deposit',
      '--config',
      file,
      '--wallet',
      anvilAccount(0).address,
      '--amount',
      '1',
    ]).catch((e: { stderr: string }) => e)
    expect((refused as { stderr: string }).stderr).toMatch(/send test USDC to the wallet/)
  })

  it('runs the demo on a local chain: funded and approved wallet, served requests', async () => {
    const demo = spawn(
      'node',
      [CLI, 'demo', '--rail', 'anvil', '--port', '0', '--json', '--data', join(dir, 'demo'), '--chunk-delay-ms', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const exited = new Promise<number | null>((resolve) => demo.once('exit', (code) => resolve(code)))
    const lines = createInterface({ input: demo.stdout })[Symbol.asyncIterator]()
    try {
      const [line] = await Promise.race([
        lines.next().then((r) => [r.value as string]),
        exited.then((code) => {
          throw new Error(`demo exited (${code})`)
        }),
      ])
      const ready = JSON.parse(line!)
      expect(ready.chain).toMatchObject({ chain_id: 31337 })
      const res = await chat(ready.base_url, ready.api_key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 16,
      })
      expect(res.status).toBe(200)
      const account = await svc(['account', 'show', '--config', ready.config, '--wallet', anvilAccount(0).address])
      expect(Number(account.balance)).toBeLessThan(25)
      expect(Number(account.balance)).toBeGreaterThan(24.99)
    } finally {
      demo.kill('SIGTERM')
      expect(await exited).toBe(0)
    }
  })
})
