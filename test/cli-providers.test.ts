import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { loadSecretBox } from '../src/store/secret-box.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SimulatedProvider } from '../src/providers/simulated/server.js'
import { openStore } from '../src/store/open.js'
import { svc } from './helpers/cli.js'
import { addressOf, marketConfig, type Market } from './helpers/market.js'

/** `svc provider endpoint …` and `svc provider offer …`: a provider's live offers from the command line. */
describe('svc provider', () => {
  let sim: SimulatedProvider
  let config: string
  let dbUrl: string
  beforeAll(async () => {
    sim = await SimulatedProvider.start()
    const dir = mkdtempSync(join(tmpdir(), 'svc-providers-'))
    config = join(dir, 'config.json')
    dbUrl = `sqlite:${join(dir, 'svc.db')}`
    const sims = new Proxy({}, { get: () => sim }) as Market['sims']
    writeFileSync(config, JSON.stringify(marketConfig(sims, dbUrl)))
  })
  afterAll(() => sim?.close())

  it.each(['llamacpp', 'vllm'] as const)(
    'lists the models a %s engine reports when its endpoint is added',
    async (dialect) => {
      const engine = await SimulatedProvider.start({ dialect, models: { 'qwen2.5-7b': {}, 'llama-3.1-8b': {} } })
      try {
        const args = ['provider', 'endpoint', 'add', '--wallet', addressOf(0x5c), '--base-url', engine.url]
        const named = [...args, '--bundle', dialect, '--profile', 'sim', '--config', config]
        const json = await svc([...named, '--json'])
        expect(json.code, json.stderr).toBe(0)
        expect(JSON.parse(json.stdout).models).toEqual(['qwen2.5-7b', 'llama-3.1-8b'])
        const text = await svc(named)
        expect(text.stdout).toMatch(/serves qwen2\.5-7b, llama-3\.1-8b/)
      } finally {
        await engine.close()
      }
    },
  )

  it('registers an endpoint, sets, pauses, resumes and withdraws an offer; a suspended provider serves none', async () => {
    const wallet = addressOf(0x5a)
    const run = async (...args: string[]) => {
      const r = await svc([...args, '--config', config, '--json'], { SIM_KEY: 'sk-cli' })
      expect(r.code, r.stderr).toBe(0)
      return JSON.parse(r.stdout)
    }
    const base = ['--wallet', wallet]
    const { id } = await run(
      'provider',
      'endpoint',
      'add',
      ...base,
      '--base-url',
      sim.url,
      '--api-key-env',
      'SIM_KEY',
      '--bundle',
      'vllm-0.7',
      '--profile',
      'sim',
    )
    expect(id).toMatch(/^ep_/)
    const at = [...base, '--endpoint', id, '--model', 'svc/atlas@1']
    await run(
      'provider',
      'offer',
      'set',
      ...at,
      '--upstream-model',
      'atlas',
      '--input-price',
      '0.1',
      '--output-price',
      '0.4',
    )
    const store = await openStore(dbUrl)
    store.providers.keys.use(loadSecretBox(JSON.parse(readFileSync(config, 'utf8'))))
    try {
      // Sealed in the store with the config's secrets key; opened with it.
      const raw = await store.db
        .selectFrom('provider_endpoints')
        .select('api_key')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
      expect(raw.api_key).not.toContain('sk-cli')
      expect((await store.providers.liveOffers()).map((o) => [o.model, o.inputPrice, o.apiKey])).toEqual([
        ['svc/atlas@1', 100_000n, 'sk-cli'],
      ])
      await run('provider', 'offer', 'pause', ...at)
      expect(await store.providers.liveOffers()).toEqual([])
      await run('provider', 'offer', 'resume', ...at)
      expect(await store.providers.liveOffers()).toHaveLength(1)
      await run('account', 'suspend', ...base)
      expect(await store.providers.liveOffers()).toEqual([])
      await run('account', 'resume', ...base)
      const listed = await run('provider', 'endpoint', 'list', ...base)
      expect(listed.endpoints[0]).toMatchObject({
        id,
        status: 'live',
        offers: [
          {
            model: 'svc/atlas@1',
            status: 'live',
            input_price_per_mtok: '0.100000',
            verification: { state: 'unverified', audits_1d: { passed: 0, failed: 0 } },
          },
        ],
      })
      // What the audits found of the offer, as the auditor wrote it.
      const t = Date.now()
      const state = { provider: wallet, model: 'svc/atlas@1', offerSignature: 's', lastAuditAt: t, since: t }
      await store.audits.setState({ ...state, state: 'suspect', passed: 2, failed: 1 })
      const audited = await svc(['provider', 'endpoint', 'list', ...base, '--config', config])
      expect(audited.stdout).toContain('at once; suspect (audits today: 2 passed, 1 failed)')
      expect(JSON.stringify(listed)).not.toContain('sk-cli')
      // Sealed with the current key already: nothing to seal again.
      expect(await run('provider', 'reseal')).toEqual({ sealed: 0, unreadable: [] })
      await run('provider', 'offer', 'withdraw', ...at)
      const resumed = await svc(['provider', 'offer', 'resume', ...at, '--config', config])
      expect(resumed.code).not.toBe(0)
      expect(resumed.stderr).toMatch(/no offer of svc\/atlas@1 on a live endpoint/)
      await run('provider', 'endpoint', 'remove', ...base, '--id', id)
      const text = await svc(['provider', 'endpoint', 'list', ...base, '--config', config])
      expect(text.stdout).toContain(`${id}  withdrawn`)
    } finally {
      await store.close()
    }
    const refused = await svc([
      'provider',
      'offer',
      'set',
      ...at,
      '--input-price',
      'cheap',
      '--output-price',
      '1',
      '--config',
      config,
    ])
    expect(refused.stderr).toMatch(/input_price must be USDC per million tokens/)
  }, 60_000)
})
