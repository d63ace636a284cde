import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { svc } from './helpers/cli.js'
import { addressOf, P, startMarket, type Market } from './helpers/market.js'
import { auditedAtlas, cheating, fundAuditor } from './helpers/audits.js'

const AUDITOR = addressOf(0x5b)

/** `svc audit run|list|show|states` on the store of a running gateway, which routes by what they found. */
describe('svc audit', () => {
  let m: Market
  let config: string
  beforeAll(async () => {
    m = await startMarket({
      edit: (c) => auditedAtlas(c, AUDITOR),
    })
    await fundAuditor(m, AUDITOR, 1_000_000n)
    config = join(mkdtempSync(join(tmpdir(), 'svc-audit-')), 'config.json')
    writeFileSync(config, JSON.stringify(m.config))
  })
  afterAll(() => m?.close())

  const run = (...args: string[]) => svc(['audit', ...args, '--config', config])

  it('audits an offer now, says where a substitute left the reference, and the gateway routes away from it', async () => {
    const honest = await run('run', '--model', 'svc/atlas@1', '--prompt', 'capital-france', '--json')
    expect(honest.code).toBe(0)
    expect(JSON.parse(honest.stdout).audits).toMatchObject([
      { provider: P.atlasCheap, prompt_id: 'capital-france', result: 'passed', state: 'unverified' },
    ])
    m.sims.atlasCheap.setFault({ kind: 'substitute' })
    const cheat = await run('run', '--model', 'svc/atlas@1', '--provider', P.atlasCheap.toLowerCase())
    m.sims.atlasCheap.setFault({ kind: 'none' })
    expect(cheat.code).toBe(1)
    expect(cheat.stdout).toMatch(
      /failed \(tokens\)\n {2}failed: left the reference at token \d+: expected ".+", got ".+"; now suspect/,
    )

    const list = JSON.parse((await run('list', '--json')).stdout).audits as { id: string; result: string }[]
    expect(list.map((a) => a.result)).toEqual(['failed', 'passed'])
    const shown = await run('show', list[0]!.id)
    expect(shown.stdout).toContain('failed: left the reference at token')
    expect(shown.stdout).toMatch(/request req_/)
    expect((await run('states')).stdout).toMatch(/svc\/atlas@1 {2}0x[0-9a-fA-F]{40} {2}suspect +passed 1, failed 1/)

    // The gateway reads the states with its offers: the suspect offer is no longer its first choice.
    await m.server.gateway.readOffers()
    expect(m.server.gateway.catalog.stateOf(`${P.atlasCheap}|svc/atlas@1`)).toBe('suspect')
  })

  it('lists earnings held back from a quarantined offer, and records a forfeit of them once', async () => {
    await cheating(m, { kind: 'substitute' }, async () => {
      for (let i = 0; i < 2; i++) expect((await run('run', '--model', 'svc/atlas@1')).code).toBe(1)
    })
    const held = JSON.parse((await run('held', '--status', 'held', '--json')).stdout).held as {
      id: string
      held_charges: number
    }[]
    expect(held).toMatchObject([{ provider: P.atlasCheap, status: 'held', held_charges: 3 }])
    const forfeit = await run('forfeit', held[0]!.id, '--note', 'substitute model')
    expect([forfeit.code, forfeit.stderr]).toEqual([0, ''])
    expect(forfeit.stdout).toMatch(/forfeited: 0\.\d+ USDC in 3 charges refunded to their payers/)
    const again = await run('release', held[0]!.id)
    expect([again.code, again.stderr]).toEqual([1, expect.stringMatching(/^error: held_\w+ was forfeited already/)])
    expect((await run('held')).stdout).toMatch(/forfeited .+ in 3 charges refunded {2}\(substitute model\)/)
  })

  it('refuses what it cannot audit, in one line', async () => {
    const noReference = await run('run', '--model', 'svc/wren@1')
    expect([noReference.code, noReference.stderr.trim()]).toEqual([
      1,
      expect.stringContaining('error: no offer of svc/wren@1 to audit'),
    ])
    expect((await run('run', '--model', 'svc/atlas@1', '--prompt', 'nope')).stderr).toContain('no audit prompt nope')
    expect((await run('show', 'aud_nope')).stderr).toContain('error: no audit aud_nope')
    expect((await run('list', '--result', 'odd')).stderr).toContain('--result must be one of')
  })
})
