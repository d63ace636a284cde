import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { svc } from './helpers/cli.js'
import { addressOf, marketConfig, type Market } from './helpers/market.js'

/** `svc key create|update --rpm --tpm --limit --limit-reset`: a key's limits from the command line. */
describe('svc key limits', () => {
  it('creates a key with limits, changes one, removes one, and refuses what is not a limit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-keys-'))
    const config = join(dir, 'config.json')
    const sim = { url: 'http://127.0.0.1:9/v1' }
    const sims = new Proxy({}, { get: () => sim }) as Market['sims']
    writeFileSync(config, JSON.stringify(marketConfig(sims, `sqlite:${join(dir, 'svc.db')}`)))
    const wallet = addressOf(0x43)
    const run = async (...args: string[]) => svc([...args, '--config', config, '--json'])
    expect((await run('account', 'create', '--wallet', wallet)).code).toBe(0)
    const created = await run('key', 'create', '--wallet', wallet, '--rpm', '60', '--tpm', '10000')
    const key = JSON.parse(created.stdout)
    expect(key).toMatchObject({ rpm: 60, tpm: 10000 })
    const updated = JSON.parse((await run('key', 'update', '--wallet', wallet, '--id', key.id, '--rpm', '5')).stdout)
    expect(updated).toEqual({ id: key.id, rpm: 5, tpm: 10000, spend_limit: null, limit_reset: null })
    await run('key', 'update', '--wallet', wallet, '--id', key.id, '--tpm', 'none')
    const list = JSON.parse((await run('key', 'list', '--wallet', wallet)).stdout)
    expect(list.keys[0]).toMatchObject({ id: key.id, rpm: 5, tpm: null })
    for (const bad of [
      ['--rpm', '0'],
      ['--rpm', 'ten'],
      ['--tpm', '1.5'],
    ]) {
      const r = await run('key', 'update', '--wallet', wallet, '--id', key.id, ...bad)
      expect(r.code).not.toBe(0)
      expect(r.stderr.trim().split('\n')[0]).toMatch(/rpm|tpm/)
    }
    const limited = await run(
      'key',
      'update',
      '--wallet',
      wallet,
      '--id',
      key.id,
      '--limit',
      '2.5',
      '--limit-reset',
      'daily',
    )
    expect(JSON.parse(limited.stdout)).toMatchObject({ rpm: 5, spend_limit: '2.500000', limit_reset: 'daily' })
    const raised = JSON.parse((await run('key', 'update', '--wallet', wallet, '--id', key.id, '--limit', '3')).stdout)
    expect(raised).toMatchObject({ spend_limit: '3.000000', limit_reset: 'daily' })
    const text = await svc(['key', 'list', '--wallet', wallet, '--config', config])
    expect(text.stdout).toContain('spend limit 3.000000 USDC (reset daily)')
    const spendOnly = await run('key', 'create', '--wallet', wallet, '--limit', '1', '--limit-reset', 'monthly')
    expect(JSON.parse(spendOnly.stdout)).toMatchObject({ rpm: null, spend_limit: '1.000000', limit_reset: 'monthly' })
    for (const [bad, says] of [
      [['--limit', '0'], /spend limit must be more than 0/],
      [['--limit', '1.1234567'], /--limit takes USDC/],
      [['--limit', '-1'], /--limit takes USDC/],
      [['--limit-reset', 'hourly'], /--limit-reset takes one of none, daily, weekly, monthly/],
      [['--limit', 'none', '--limit-reset', 'weekly'], /--limit-reset needs a spend limit/],
    ] as const) {
      const r = await run('key', 'update', '--wallet', wallet, '--id', key.id, ...bad)
      expect(r.code).not.toBe(0)
      expect(r.stderr).toMatch(says)
    }
    const removed = await run('key', 'update', '--wallet', wallet, '--id', key.id, '--limit', 'none')
    expect(JSON.parse(removed.stdout)).toMatchObject({ spend_limit: null, limit_reset: null })
    const unknown = await run('key', 'update', '--wallet', wallet, '--id', 'key_nope', '--rpm', '1')
    expect(unknown.stderr).toMatch(/no live key key_nope/)
  }, 60_000)
})
