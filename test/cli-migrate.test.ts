import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { svc } from './helpers/cli.js'
import { marketConfig, type Market } from './helpers/market.js'
import { dropSchema, freshStoreUrl, postgresReachable, type StoreKind } from './helpers/stores.js'

/** `svc migrate`: a store created or brought to this svc's schema explicitly, saying what ran. */
describe.each<StoreKind>(['sqlite', 'postgres'])('svc migrate on %s', (kind) => {
  const url = freshStoreUrl(kind)
  afterAll(() => (kind === 'postgres' ? dropSchema(url) : undefined))

  it('creates the schema, runs every migration once, then finds it current', async (ctx) => {
    if (kind === 'postgres' && !(await postgresReachable())) return ctx.skip()
    const config = join(mkdtempSync(join(tmpdir(), 'svc-migrate-')), 'config.json')
    const sims = new Proxy({}, { get: () => ({ url: 'http://127.0.0.1:9/v1' }) }) as Market['sims']
    writeFileSync(config, JSON.stringify(marketConfig(sims, url)))
    const first = await svc(['migrate', '--config', config, '--json'])
    expect(first.code, first.stderr).toBe(0)
    const ran = JSON.parse(first.stdout)
    expect(ran.migrations_run[0]).toBe('001_initial')
    expect(ran.migrations_run.at(-1)).toBe(ran.schema)
    expect(new Set(ran.migrations_run).size).toBe(ran.migrations_run.length)
    const again = await svc(['migrate', '--config', config])
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain(`schema current (${ran.schema})`)
    expect(again.stdout).not.toMatch(/postgres:\/\/[^…]*@/)
  }, 60_000)
})
