import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { privateKeyToAccount } from 'viem/accounts'
import type { Hex } from 'viem'
import { daemon, svc, type Daemon } from './helpers/cli.js'

/** `svc receipt verify` on receipts of the demo (local rail), before and after `svc settle`. */
describe('svc receipt verify', () => {
  let demo: Daemon
  let data: string
  let line: { base_url: string; api_key: string; config: string }
  beforeAll(async () => {
    data = mkdtempSync(join(tmpdir(), 'svc-demo-'))
    demo = await daemon(
      ['demo', '--port', '0', '--data', data, '--json', '--chunk-delay-ms', '0', '--no-real-model'],
      /\n/,
    )
    line = JSON.parse(demo.output().split('\n')[0]!)
  })
  afterAll(() => demo?.stop())

  it('verifies a demo receipt after svc settle, says what it could not check before, and fails a changed one', async () => {
    // The demo made its receipt key, publishes its address, and prints neither the key nor its file's content.
    const key = readFileSync(join(data, 'receipt.key'), 'utf8').trim() as Hex
    const signer = await (await fetch(`${line.base_url}/v1/receipts/signer`)).json()
    expect(signer.address).toBe(privateKeyToAccount(key).address)
    expect(demo.output()).not.toContain(key.slice(2))

    const res = await fetch(`${line.base_url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${line.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc/wren@1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
    })
    const id = (await res.json()).svc.receipt_id as string
    const record = await (
      await fetch(`${line.base_url}/v1/usage/${id}`, { headers: { authorization: `Bearer ${line.api_key}` } })
    ).json()
    const file = join(data, `${id}.json`)
    writeFileSync(file, JSON.stringify(record))
    const base = ['receipt', 'verify', file, '--base-url', line.base_url]

    const unsettled = await svc(base)
    expect(unsettled.code).toBe(0)
    expect(unsettled.stdout).toContain(`receipt ${id}: nothing fails, but not everything could be checked`)
    expect(unsettled.stdout).toMatch(/holds +signature: signed by 0x/)
    // The gateway's address from the demo's config, as from --base-url; a flag still wins over the config.
    const byConfig = await svc(['receipt', 'verify', file, '--config', line.config])
    expect(byConfig.code).toBe(0)
    expect(byConfig.stdout).toBe(unsettled.stdout)
    const wrongFlag = await svc([
      'receipt',
      'verify',
      file,
      '--config',
      line.config,
      '--base-url',
      'http://127.0.0.1:1',
    ])
    expect(wrongFlag.code).toBe(1)
    expect(wrongFlag.stderr).toContain('cannot read the published signers at http://127.0.0.1:1')

    expect((await svc(['settle', '--config', line.config])).code).toBe(0)
    const settled = await svc([...base, '--api-key', line.api_key, '--json'])
    expect(settled.code).toBe(0)
    const verdict = JSON.parse(settled.stdout)
    expect(verdict).toMatchObject({ receipt_id: id, ok: true, complete: false })
    expect(verdict.checks.map((c: { ok: boolean | null }) => c.ok)).toEqual([true, true, true, null])
    expect(verdict.checks[3].detail).toMatch(/^not on a chain/)

    record.receipt.receipt.cost = String(BigInt(record.receipt.receipt.cost) + 1n)
    writeFileSync(file, JSON.stringify(record))
    const changed = await svc([...base, '--api-key', line.api_key])
    expect(changed.code).toBe(1)
    expect(changed.stdout).toContain(`receipt ${id}: does NOT verify`)
    expect(changed.stdout).toMatch(
      /FAILS +signature: the signature recovers 0x[0-9a-fA-F]{40}, which is not a published/,
    )
    expect(changed.stdout).toMatch(/FAILS +leaf: /)
  })
})
