import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, type AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { daemon, svc } from './helpers/cli.js'
import { dropSchema, freshPostgresUrl, postgresReachable } from './helpers/stores.js'

const READY = /node --input-type=module/

/** A port free now, for a demo that must bind a known one. */
async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise((resolve) => s.close(resolve))
  return port
}

const field = (out: string, name: string) => new RegExp(`${name}\\s+(\\S+)`).exec(out)?.[1]

async function balanceOf(config: string): Promise<string> {
  const shown = await svc([
    'account',
    'show',
    '--wallet',
    '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    '--config',
    config,
    '--json',
  ])
  expect(shown.code, shown.stderr).toBe(0)
  return JSON.parse(shown.stdout).balance
}

// The demo is started without the real model (node-llama-cpp in engines/): these tests are about its data directory,
// and each of the first test's three starts would load a model.
describe('svc demo started again on the same data directory', () => {
  it('keeps its port, its one key and its balance', { timeout: 90_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    const port = await freePort()
    const first = await daemon(['demo', '--data', data, '--chunk-delay-ms', '0', '--no-real-model'], READY, {
      PORT: String(port),
    })
    const out1 = first.output()
    await first.stop()
    expect(field(out1, 'base URL')).toBe(`http://127.0.0.1:${port}`)
    const config = join(data, 'config.json')
    const key = field(out1, 'API key')!
    expect(statSync(join(data, 'demo-key')).mode & 0o777).toBe(0o600)
    // A request spends some of the balance, which the next start must not top up.
    const spent = await daemon(['demo', '--data', data, '--chunk-delay-ms', '0', '--no-real-model'], READY)
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
    })
    expect(res.status).toBe(200)
    const out2 = spent.output()
    await spent.stop()
    expect(field(out2, 'base URL')).toBe(`http://127.0.0.1:${port}`)
    expect(field(out2, 'API key')).toBe(key)
    expect(out2).toContain('not topped up')
    const before = await balanceOf(config)
    expect(Number(before)).toBeLessThan(25)

    const third = await daemon(['demo', '--data', data, '--chunk-delay-ms', '0', '--no-real-model'], READY)
    await third.stop()
    expect(await balanceOf(config)).toBe(before)
    const keys = await svc([
      'key',
      'list',
      '--wallet',
      '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
      '--config',
      config,
      '--json',
    ])
    expect(JSON.parse(keys.stdout).keys.filter((k: { name: string }) => k.name === 'demo')).toHaveLength(1)
    expect(JSON.parse(readFileSync(config, 'utf8')).listen.port).toBe(port)
  })

  it('says so when asked for another port than its data directory had', async () => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    const [a, b] = [await freePort(), await freePort()]
    const first = await daemon(
      ['demo', '--port', String(a), '--data', data, '--chunk-delay-ms', '0', '--no-real-model'],
      READY,
    )
    await first.stop()
    const second = await daemon(
      ['demo', '--port', String(b), '--data', data, '--chunk-delay-ms', '0', '--no-real-model'],
      READY,
    )
    const out = second.output()
    await second.stop()
    expect(out).toContain(`this data directory's config had ${a}, now ${b}`)
  })

  it('serves from DATABASE_URL when it is set', async (ctx) => {
    if (!(await postgresReachable())) ctx.skip()
    const url = freshPostgresUrl()
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    const d = await daemon(['demo', '--port', '0', '--data', data, '--chunk-delay-ms', '0', '--json'], /\n/, {
      DATABASE_URL: url,
    })
    try {
      const line = JSON.parse(d.output().split('\n')[0]!)
      expect(JSON.parse(readFileSync(line.config, 'utf8')).store).toBe(url)
    } finally {
      await d.stop()
      await dropSchema(url)
    }
  })

  it('refuses a DATABASE_URL it cannot use, in words', async () => {
    const data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    const r = await svc(['demo', '--data', data], { DATABASE_URL: 'mysql://x' })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('DATABASE_URL must start with sqlite: or postgres://')
  })
})
