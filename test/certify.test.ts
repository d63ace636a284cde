import { afterEach, describe, expect, it } from 'vitest'
import { SimulatedProvider, type SimOptions } from '../src/providers/simulated/server.js'
import { certify, CertifyError, type Certification } from '../src/tools/certify.js'
import { DEMO_CONTRACTS, DEMO_SIM_MODELS } from '../src/cli/demo/market.js'
import { svc } from './helpers/cli.js'

const sims: SimulatedProvider[] = []
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()))
})
async function sim(opts: SimOptions = {}): Promise<SimulatedProvider> {
  const s = await SimulatedProvider.start(opts)
  sims.push(s)
  return s
}

const failed = (c: Certification) => c.probes.filter((p) => !p.passed).map((p) => p.name)
/** Smaller caps keep the runs that only compare quick. */
const quick = { maxArgumentBytes: 4096, maxConcurrency: 4 }

describe('svc certify against the demo’s simulated upstreams', () => {
  it('earns exactly the demo’s contracts: atlas everything, tern its limited contract', async () => {
    const s = await sim({ models: DEMO_SIM_MODELS, replyTokens: 24 })
    const atlas = await certify({ baseUrl: s.url, model: 'atlas' })
    expect(failed(atlas)).toEqual([])
    expect(atlas.tool_contract).toEqual(DEMO_CONTRACTS.atlas)
    const tern = await certify({ baseUrl: s.url, model: 'tern' })
    expect(failed(tern)).toEqual([
      'tool_choice.required.plain',
      'tool_choice.required.stream',
      'tool_choice.named.plain',
      'tool_choice.named.stream',
      'parallel_tool_calls.true',
      'strict.tools',
      'strict.response_format',
      'arguments.65536',
      'agent_loop',
      'concurrency.16',
    ])
    expect(tern.probes.find((p) => p.name === 'concurrency.16')!.detail).toMatch(/429/)
    expect(tern.tool_contract).toEqual(DEMO_CONTRACTS.tern)
  })
})

describe('the certification id', () => {
  it('is a hash of the results: the same for any fragmentation, different when a result differs', async () => {
    const ids = new Set<string>()
    for (const fragmentation of ['whole', 'split', 'bytes', 'unindexed'] as const) {
      const c = await certify({ baseUrl: (await sim({ fragmentation })).url, model: 'atlas', ...quick })
      expect(failed(c), fragmentation).toEqual([])
      ids.add(c.tool_contract!.certification_id)
    }
    expect(ids.size).toBe(1)
    const other = await certify({
      baseUrl: (await sim()).url,
      model: 'atlas',
      maxArgumentBytes: 1024,
      maxConcurrency: 4,
    })
    expect(other.tool_contract!.certification_id).not.toBe([...ids][0])
    expect(other.tool_contract!.certification_id).toMatch(/^cert-[0-9a-f]{16}$/)
  })
})

describe('faulty upstreams earn less', () => {
  it.each(['bad-tool-args', 'empty-tool-name'] as const)('%s: no tool contract at all', async (kind) => {
    const c = await certify({ baseUrl: (await sim({ fault: { kind } })).url, model: 'atlas', ...quick })
    expect(c.tool_contract).toBeNull()
    expect(c.probes).toEqual([expect.objectContaining({ name: 'tool_choice.auto.plain', passed: false })])
  })

  it('an upstream that silently ignores tool_choice keeps only what it happens to satisfy', async () => {
    const s = await sim({ models: { m: { toolChoice: ['auto'], toolChoiceUnsupported: 'ignore' } } })
    const c = await certify({ baseUrl: s.url, model: 'm', ...quick })
    // none: it calls anyway; named: it calls the tool the message mentions. required: auto happens to call.
    expect(c.tool_contract!.tool_choice).toEqual(['auto', 'required'])
    expect(c.probes.find((p) => p.name === 'tool_choice.none.stream')!.detail).toMatch(/tool_choice is none/)
    expect(c.probes.find((p) => p.name === 'tool_choice.named.plain')!.detail).toMatch(/names "get_time"/)
  })

  it('an engine that ignores a named choice is not certified for it by a reply that complied by chance', async () => {
    // llama.cpp's server reads tool_choice only as a string: a named one is auto, and the model calls what it likes.
    const s = await sim({ dialect: 'llamacpp' })
    const once = await certify({ baseUrl: s.url, model: 'm', ...quick, repeats: 1 })
    // Asked once, to say hello with get_weather named, it called get_weather, its first tool, and seemed to obey.
    expect(once.tool_contract!.tool_choice).toEqual(['auto', 'none', 'required', 'named'])
    const c = await certify({ baseUrl: s.url, model: 'm', ...quick })
    expect(c.tool_contract!.tool_choice).toEqual(['auto', 'none', 'required'])
    expect(c.probes.find((p) => p.name === 'tool_choice.named.plain')!.detail).toMatch(
      /^repeat 2 of 3: .*names "get_time"/,
    )
    // Each repeat pinned its sampling, with a seed of its own; plain and streamed stopped at the first disobeyed.
    const named = s.requests.filter((r) => typeof r.tool_choice === 'object' && r.tool_choice !== null)
    expect(named.slice(-4).map((r) => [r.temperature, r.seed])).toEqual([
      [0, 1],
      [0, 2],
      [0, 1],
      [0, 2],
    ])
  })

  it('takes behaviours through its control API only when they are behaviours', async () => {
    const s = await sim()
    const set = (models: unknown) =>
      fetch(`${s.url.replace(/\/v1$/, '')}/_sim/settings`, { method: 'POST', body: JSON.stringify({ models }) })
    const refused = await set({ m: { toolChoice: 5 } })
    expect(refused.status).toBe(400)
    expect((await refused.json()).error.message).toMatch(/^models: m\.toolChoice must be an array of/)
    expect((await set({ m: { parallel: false } })).status).toBe(200)
    expect(s.settings.models).toEqual({ m: { parallel: false } })
  })

  it('one ability missing at a time costs exactly that part of the contract', async () => {
    const s = await sim({
      models: {
        serial: { parallel: false },
        short: { maxArgumentBytes: 2000 },
        loops: { agentic: false },
        lax: { strict: false },
      },
    })
    const contract = async (model: string) => (await certify({ baseUrl: s.url, model, ...quick })).tool_contract!
    const full = await contract('full')
    const { certification_id: _id, ...rest } = full
    expect(rest).toMatchObject({
      parallel_tool_calls: true,
      strict_schemas: true,
      max_argument_bytes: 4096,
      certified_concurrency: 4,
      agentic_certified: true,
    })
    const differs = async (model: string) => {
      const c = await contract(model)
      expect(c.certification_id).not.toBe(full.certification_id)
      return Object.fromEntries(
        Object.entries(c).filter(
          ([k, v]) => k !== 'certification_id' && JSON.stringify(v) !== JSON.stringify(full[k as keyof typeof full]),
        ),
      )
    }
    expect(await differs('serial')).toEqual({ parallel_tool_calls: false })
    expect(await differs('short')).toEqual({ max_argument_bytes: 1024 })
    expect(await differs('loops')).toEqual({ agentic_certified: false })
    expect(await differs('lax')).toEqual({ strict_schemas: false })
  })

  it('an upstream that cannot answer a plain request is an error, not a contract', async () => {
    const s = await sim({ fault: { kind: 'status-500' } })
    await expect(certify({ baseUrl: s.url, model: 'atlas' })).rejects.toThrow(CertifyError)
    await expect(certify({ baseUrl: s.url, model: 'atlas' })).rejects.toThrow(
      /did not answer a plain chat request.*500/,
    )
  })
})

describe('the svc certify command', () => {
  it('prints the earned contract with --json, and the probes as text without it', async () => {
    const s = await sim({ models: { tern: { toolChoice: ['auto', 'none'], parallel: false } } })
    const args = [
      'certify',
      '--base-url',
      s.url,
      '--model',
      'tern',
      '--max-argument-bytes',
      '4096',
      '--max-concurrency',
      '2',
    ]
    const json = await svc([...args, '--json'])
    expect(json.code, json.stderr).toBe(0)
    const out = JSON.parse(json.stdout)
    expect(out).toMatchObject({ base_url: s.url, model: 'tern' })
    expect(out.tool_contract).toMatchObject({
      tool_choice: ['auto', 'none'],
      parallel_tool_calls: false,
      max_argument_bytes: 4096,
      certified_concurrency: 2,
      metering_version: 1,
    })
    const text = await svc(args)
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/FAIL {2}tool_choice\.required\.plain +repeat 1 of 3: upstream answered 400/)
    expect(text.stdout).toContain(`"certification_id": "${out.tool_contract.certification_id}"`)
  })

  it('fails with one line when the upstream is unreachable or the options are wrong', async () => {
    const s = await sim({ fault: { kind: 'refuse-connections' } })
    const r = await svc(['certify', '--base-url', s.url, '--model', 'atlas', '--timeout-ms', '2000'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^error: .* did not answer a plain chat request/)
    const bad = await svc(['certify', '--base-url', s.url, '--model', 'atlas', '--max-concurrency', 'lots'])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/--max-concurrency must be a positive integer/)
  })
})
