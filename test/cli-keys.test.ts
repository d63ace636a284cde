import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { svc } from './helpers/cli.js'
import { addressOf, marketConfig, type Market } from './helpers/market.js'

/** `svc key create|update --rpm --tpm`: a key's rate limits from the command line. */
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
    expect(updated).toEqual({ id: key.id, rpm: 5, tpm: 10000 })
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
    const unknown = await run('key', 'update', '--wallet', wallet, '--id', 'key_nope', '--rpm', '1')
    expect(unknown.stderr).toMatch(/no live key key_nope/)
  }, 60_000)
})
