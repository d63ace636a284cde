import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { cleanEnv, daemon, svc, type Daemon, LISTENING, listeningLine } from './helpers/cli.js'
import { addressOf } from './helpers/market.js'
import { ENGINE_INSTALLED } from './helpers/engine.js'

const sh = promisify(execFile)

describe('svc demo', () => {
  let demo: Daemon
  let data: string
  beforeAll(async () => {
    data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    demo = await daemon(
      ['demo', '--port', '0', '--data', data, '--chunk-delay-ms', '0', '--no-real-model'],
      /node --input-type=module/,
    )
  })
  afterAll(() => demo?.stop())

  it('prints the base URL, the portal URL and a funded key, and the printed curl works as printed', async () => {
    const out = demo.output()
    const base = /base URL\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!
    expect(out).toContain(`portal     ${base}/portal`)
    expect(out).toMatch(/API key\s+svc_test_[0-9A-Za-z]{40}\n/)
    const lines = out.split('\n')
    const start = lines.findIndex((l) => l.trim().startsWith('curl '))
    const curl = lines.slice(start, start + 3).join('\n')
    const { stdout } = await sh('bash', ['-c', curl], { env: cleanEnv() })
    const reply = JSON.parse(stdout)
    expect(reply.object).toBe('chat.completion')
    expect(reply.svc.cost_usdc).toMatch(/^0\.\d{6}$/)
  })

  it('prints an SDK example that works as printed', async () => {
    const lines = demo.output().split('\n')
    const start = lines.findIndex((l) => l.includes('OPENAI_BASE_URL='))
    const snippet = lines.slice(start, start + 2).join('\n')
    const { stdout } = await sh('bash', ['-c', snippet], { env: cleanEnv(), cwd: process.cwd() })
    expect(stdout).toMatch(/cost_usdc: '0\.\d{6}'/)
    expect(stdout).toMatch(/status: 'available'/)
  })

  // Ten svc commands, each a node process of its own: seconds each on a loaded machine.
  it('lets the other commands act on the same store through the written config', async () => {
    const config = join(data, 'config.json')
    const wallet = addressOf(0x42)
    expect(
      (await svc(['account', 'create', '--wallet', wallet.toLowerCase(), '--config', config, '--json'])).stdout,
    ).toContain(`"wallet":"${wallet}"`)
    expect(
      JSON.parse((await svc(['deposit', '--wallet', wallet, '--amount', '1.5', '--config', config, '--json'])).stdout)
        .balance,
    ).toBe('1.500000')
    expect(
      JSON.parse((await svc(['approve', '--wallet', wallet, '--amount', '1', '--config', config, '--json'])).stdout)
        .spendable,
    ).toBe('1.000000')
    const key = JSON.parse(
      (await svc(['key', 'create', '--wallet', wallet, '--name', 'ci', '--config', config, '--json'])).stdout,
    )
    expect(key.api_key).toMatch(/^svc_test_/)
    const base = /base URL\s+(http:\/\/[\d.:]+)/.exec(demo.output())![1]!
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc/wren@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
    })
    expect(res.status).toBe(200)
    const list = JSON.parse((await svc(['key', 'list', '--wallet', wallet, '--config', config, '--json'])).stdout)
    expect(list.keys[0]).toMatchObject({ id: key.id, name: 'ci', prefix: key.prefix })
    expect(JSON.stringify(list)).not.toContain(key.api_key)
    const usage = JSON.parse((await svc(['usage', '--wallet', wallet, '--config', config, '--json'])).stdout)
    expect(usage.data[0]).toMatchObject({ model: 'svc/wren@1', outcome: 'completed' })
    const shown = JSON.parse((await svc(['account', 'show', '--wallet', wallet, '--config', config, '--json'])).stdout)
    expect(shown.balance).toBe(
      `1.${String(1_500_000 - Number(usage.total_cost_usdc.replace('.', '')))
        .padStart(7, '0')
        .slice(1)}`,
    )
    expect((await svc(['key', 'revoke', '--wallet', wallet, '--id', key.id, '--config', config])).code).toBe(0)
    const settled = JSON.parse((await svc(['settle', '--config', config, '--json'])).stdout)
    expect(settled.ran).toBe(true)
    expect(settled.batches.length).toBeGreaterThanOrEqual(1)
  }, 90_000)
})

describe('svc demo --json', () => {
  it('prints one line with base_url, portal_url, api_key and config', async () => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    const d = await daemon(['demo', '--port', '0', '--data', data, '--json'], /\n/)
    try {
      const line = JSON.parse(d.output().split('\n')[0]!)
      // With node-llama-cpp in engines/, the demo serves a real model too, and says where.
      const real = ENGINE_INSTALLED ? ['real_model'] : []
      expect(Object.keys(line).sort()).toEqual(['api_key', 'base_url', 'config', 'portal_url', ...real])
      expect(line.portal_url).toBe(`${line.base_url}/portal`)
      expect(JSON.parse(readFileSync(line.config, 'utf8')).store).toBe(`sqlite:${join(data, 'svc.db')}`)
      // A second demo on the same data and port cannot start: it says so, and leaves the running one's config alone.
      const written = readFileSync(line.config, 'utf8')
      const port = new URL(line.base_url).port
      const again = await svc(['demo', '--port', port, '--data', data])
      expect(again.code).toBe(1)
      expect(again.stderr).toContain(`port ${port} is in use; choose another with --port`)
      expect(readFileSync(line.config, 'utf8')).toBe(written)
      expect((await svc(['demo', '--chunk-delay-ms', 'abc', '--data', data])).stderr).toContain(
        '--chunk-delay-ms must be a whole number of milliseconds, got abc',
      )
    } finally {
      await d.stop()
    }
  })
})

describe('svc sim-provider and svc serve', () => {
  it('serve runs the gateway from a config file whose provider is a separate sim-provider process', async () => {
    const sim = await daemon(['sim-provider', '--port', '0', '--fault', 'status-500', '--json'], /\n/)
    const dir = mkdtempSync(join(tmpdir(), 'svc-serve-'))
    let gw: Daemon | undefined
    try {
      const simInfo = JSON.parse(sim.output().split('\n')[0]!)
      expect(simInfo.fault).toBe('status-500')
      const config = {
        listen: { host: '127.0.0.1', port: 0 },
        store: `sqlite:${join(dir, 'svc.db')}`,
        rail: { kind: 'local' },
        feeBps: 100,
        models: [
          {
            id: 'svc/solo@1',
            owned_by: 'x',
            contextLimit: 4096,
            capabilities: {
              workload: 'chat',
              tools: false,
              structuredOutputs: false,
              reasoning: false,
              streaming: true,
              maxOutputTokens: 256,
            },
          },
        ],
        providers: [
          {
            address: addressOf(0x77),
            baseUrl: simInfo.base_url,
            bundle: 'sim',
            profile: 'cli',
            offers: [
              {
                model: 'svc/solo@1',
                upstreamModel: 'solo',
                input_price_per_mtok: '1000000',
                output_price_per_mtok: '2000000',
                maxConcurrency: 4,
              },
            ],
          },
        ],
      }
      const file = join(dir, 'config.json')
      writeFileSync(file, JSON.stringify(config))
      gw = await daemon(['serve', '--config', file], LISTENING)
      const base = listeningLine(gw.output()).base_url
      const wallet = addressOf(0x55)
      await svc(['deposit', '--wallet', wallet, '--amount', '2', '--config', file])
      await svc(['approve', '--wallet', wallet, '--amount', '2', '--config', file])
      const key = JSON.parse(
        (await svc(['key', 'create', '--wallet', wallet, '--config', file, '--json'])).stdout,
      ).api_key
      const ask = () =>
        fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'svc/solo@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
        })
      expect((await ask()).status).toBe(503)
      await fetch(simInfo.base_url.replace('/v1', '/_sim/fault'), {
        method: 'POST',
        body: JSON.stringify({ mode: 'none' }),
      })
      // The breaker may hold the provider out for its cool-down; the request succeeds once it half-opens.
      await expect.poll(async () => (await ask()).status, { timeout: 10_000, interval: 500 }).toBe(200)
    } finally {
      await gw?.stop()
      await sim.stop()
    }
  })
})
