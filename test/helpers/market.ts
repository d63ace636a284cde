import { newSecretsKey } from '../../src/store/secret-box.js'
import { afterEach } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { getAddress } from 'viem'
import { generatePrivateKey } from 'viem/accounts'
import type { Config } from '../../src/config-schema.js'
import type { ToolContract } from '../../src/protocol/models.js'
import { SimulatedProvider, type SimOptions } from '../../src/providers/simulated/server.js'
import { startServer, type RunningServer } from '../../src/server.js'
import type { PortalOptions } from '../../src/portal/plugin.js'
import { openStore } from '../../src/store/open.js'
import type { Store } from '../../src/store/store.js'
import { depositTo, issueKey, openAccount } from '../../src/accounts/operations.js'
import { freshStoreUrl, dropSchema, type StoreKind } from './stores.js'

export const FULL_CONTRACT: ToolContract = {
  tool_choice: ['auto', 'none', 'required', 'named'],
  parallel_tool_calls: true,
  strict_schemas: true,
  tool_streaming: 'whole-call',
  max_argument_bytes: 4096,
  certified_concurrency: 16,
  agentic_certified: true,
  metering_version: 1,
  certification_id: 'cert-test-atlas',
}
export const LIMITED_CONTRACT: ToolContract = {
  tool_choice: ['auto', 'none'],
  parallel_tool_calls: false,
  strict_schemas: false,
  tool_streaming: 'whole-call',
  max_argument_bytes: 1024,
  certified_concurrency: 4,
  agentic_certified: false,
  metering_version: 1,
  certification_id: 'cert-test-tern',
}

export const addressOf = (n: number) => getAddress(`0x${n.toString(16).padStart(2, '0').repeat(20)}`)

/** Provider addresses in the test market. */
export const P = {
  atlasCheap: addressOf(0xa1),
  atlasDear: addressOf(0xa2),
  tern: addressOf(0xb1),
  wren: addressOf(0xc1),
  quill: addressOf(0xd1),
}
export const USER = addressOf(0x11)

export interface Market {
  sims: {
    atlasCheap: SimulatedProvider
    atlasDear: SimulatedProvider
    tern: SimulatedProvider
    wren: SimulatedProvider
    quill: SimulatedProvider
    vendor: SimulatedProvider
  }
  server: RunningServer
  url: string
  store: Store
  config: Config
  key: string
  accountId: number
  close(): Promise<void>
}

export interface MarketOptions {
  store?: StoreKind
  /** How the gateway reaches its store, when not straight (a proxy in between); a fresh store of `store` kind. */
  reach?: (storeUrl: string) => string
  tuning?: Config['tuning']
  sim?: SimOptions
  /** Deposit and cap of the test account, in base units. */
  funds?: bigint
  cap?: bigint
  edit?: (config: Config) => void
  portal?: PortalOptions
  /** Wallet of the test account (default USER); on the evm rail its funds come from the chain, not a deposit. */
  user?: string
  /** The gateway's log lines (default: dropped). */
  log?: (msg: string, err?: unknown) => void
  /** The gateway's clock (default: Date.now). */
  now?: () => number
  /** Structured log lines (access lines): silent by default. */
  logger?: import('../../src/ops/log.js').Logger
}

/**
 * The test marketplace: atlas@1 (tools, two providers), tern@2 (limited tools), wren@1 (small context), quill@1 (no
 * streaming), a vendor.
 */
let receiptKeyFile: string | undefined

/** A receipt key file for this test process's markets (a gateway without one logs that it made its own). */
function testReceiptKey(): string {
  if (receiptKeyFile) return receiptKeyFile
  receiptKeyFile = join(mkdtempSync(join(tmpdir(), 'svc-receipt-')), 'receipt.key')
  writeFileSync(receiptKeyFile, generatePrivateKey(), { mode: 0o600 })
  return receiptKeyFile
}

let secretsKeyFile: string | undefined
/** One secrets key file for the run's markets, as an operator's would be. */
function testSecretsKey(): string {
  if (secretsKeyFile) return secretsKeyFile
  secretsKeyFile = join(mkdtempSync(join(tmpdir(), 'svc-secrets-')), 'secrets.key')
  writeFileSync(secretsKeyFile, newSecretsKey(), { mode: 0o600 })
  return secretsKeyFile
}

export function marketConfig(s: Market['sims'], storeUrl: string, tuning?: Config['tuning']): Config {
  const prov = (
    address: string,
    sim: SimulatedProvider,
    bundle: string,
    offers: Config['providers'][number]['offers'],
  ) => ({ address, baseUrl: sim.url, bundle, profile: 'sim', offers })
  /** An offer of `model` as `upstreamModel` at `[input, output]` base units per million tokens. */
  const offer = (model: string, upstreamModel: string, [input, output]: [number, number]) => ({
    model,
    upstreamModel,
    input_price_per_mtok: String(input),
    output_price_per_mtok: String(output),
    maxConcurrency: 64,
  })
  const caps = (tools: boolean, maxOutputTokens: number, streaming = true) => ({
    workload: 'chat' as const,
    tools,
    structuredOutputs: tools,
    reasoning: false,
    streaming,
    maxOutputTokens,
  })
  return {
    listen: { host: '127.0.0.1', port: 0 },
    store: storeUrl,
    rail: { kind: 'local' },
    metrics: false,
    receipts: { keyFile: testReceiptKey() },
    secrets: { keyFile: testSecretsKey() },
    providerEndpoints: { allowAddresses: ['loopback'] },
    feeBps: 500,
    models: [
      {
        id: 'svc/atlas@1',
        owned_by: 'atlas-labs',
        contextLimit: 32768,
        capabilities: caps(true, 4096),
        tool_contract: FULL_CONTRACT,
      },
      {
        id: 'svc/tern@2',
        owned_by: 'tern-ai',
        contextLimit: 16384,
        capabilities: caps(true, 2048),
        tool_contract: LIMITED_CONTRACT,
      },
      { id: 'svc/wren@1', owned_by: 'wren', contextLimit: 512, capabilities: caps(false, 256) },
      { id: 'svc/quill@1', owned_by: 'quill', contextLimit: 8192, capabilities: caps(false, 1024, false) },
    ],
    providers: [
      prov(P.atlasCheap, s.atlasCheap, 'vllm-0.6', [offer('svc/atlas@1', 'atlas', [150_000, 600_000])]),
      prov(P.atlasDear, s.atlasDear, 'sglang-0.4', [offer('svc/atlas@1', 'atlas-b', [200_000, 800_000])]),
      prov(P.tern, s.tern, 'tgi-2', [offer('svc/tern@2', 'tern', [100_000, 400_000])]),
      prov(P.wren, s.wren, 'llamacpp', [offer('svc/wren@1', 'wren', [50_000, 100_000])]),
      prov(P.quill, s.quill, 'vllm-0.6', [offer('svc/quill@1', 'quill', [80_000, 300_000])]),
    ],
    cortex: { candidates: ['svc/atlas@1', 'svc/tern@2', 'svc/wren@1'] },
    managed: {
      baseUrl: s.vendor.url,
      apiKey: 'vendor-key',
      upstreamModel: 'vendor-large',
      input_price_per_mtok: '3000000',
      output_price_per_mtok: '15000000',
    },
    tuning: {
      firstByteTimeoutMs: 500,
      replyTimeoutMs: 500,
      breakerFailures: 3,
      breakerCooldownMs: 2_000,
      keyCacheMs: 0,
      shutdownGraceMs: 100,
      // No probes of idle offers: tests count what their providers are asked.
      offerProbeIntervalMs: 0,
      ...tuning,
    },
  }
}

/** The market's simulated providers, each started with `sim` (the vendor also with its API key). */
export async function startSims(sim: MarketOptions['sim'] = {}): Promise<Market['sims']> {
  const start = () => SimulatedProvider.start(sim)
  return {
    atlasCheap: await start(),
    atlasDear: await start(),
    tern: await start(),
    wren: await start(),
    quill: await start(),
    vendor: await SimulatedProvider.start({ ...sim, apiKey: 'vendor-key' }),
  }
}

export async function startMarket(opts: MarketOptions = {}): Promise<Market> {
  const sims = await startSims(opts.sim)
  const storeUrl = freshStoreUrl(opts.store ?? 'sqlite')
  const config = marketConfig(sims, storeUrl, opts.tuning)
  opts.edit?.(config)
  const store = await openStore(opts.reach ? opts.reach(storeUrl) : storeUrl)
  const server = await startServer(config, {
    store,
    log: opts.log ?? (() => {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.portal ? { portal: opts.portal } : {}),
  })
  const now = opts.now ?? Date.now
  const { account } = await openAccount(store, opts.user ?? USER, now())
  if (config.rail.kind === 'local') {
    await depositTo(store, account.id, opts.funds ?? 10_000_000n, now())
    await store.accounts.approve(account.id, opts.cap ?? opts.funds ?? 10_000_000n)
  }
  const { key } = await issueKey({ now: now(), store, accountId: account.id, name: 'test' })
  return {
    sims,
    server,
    url: server.url,
    store,
    config,
    key,
    accountId: account.id,
    async close() {
      await server.close()
      await store.close()
      await Promise.all(Object.values(sims).map((s) => s.close()))
      if (opts.store === 'postgres') await dropSchema(storeUrl)
    },
  }
}

/** A fresh market per test, closed after it: `const market = marketPerTest()`, then `await market(opts)` in a test. */
export function marketPerTest(): (opts?: MarketOptions) => Promise<Market> {
  let current: Market | undefined
  afterEach(async () => {
    await current?.close()
    current = undefined
  })
  return async (opts = {}) => (current = await startMarket(opts))
}

/** Reads a whole SSE response into its data payloads, in order. */
export async function sseEvents(res: Response): Promise<string[]> {
  const text = await res.text()
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6))
}

export function chat(url: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}) {
  return chatWith(url, key, body, { headers })
}

/** A chat request with headers of its own and a signal that can abort it. */
export function chatWith(
  url: string,
  key: string | undefined,
  body: unknown,
  init: { headers?: Record<string, string>; signal?: AbortSignal },
): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...init.headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(init.signal ? { signal: init.signal } : {}),
  })
}

/**
 * Adds an embedding model to a market's config (vectors of 16 numbers, which the simulator makes and a request may
 * ask shorter), offered by the given providers at their input prices (base units per million tokens).
 */
export function addEmbeddingModel(
  cfg: Config,
  id: string,
  offers: [address: string, input: bigint][],
  vectors: { dimensions: number; shortenable: boolean } = { dimensions: 16, shortenable: true },
): void {
  cfg.models.push({
    id,
    owned_by: 'loom',
    contextLimit: 64,
    capabilities: {
      workload: 'embedding',
      tools: false,
      structuredOutputs: false,
      reasoning: false,
      streaming: false,
      maxOutputTokens: 1,
      ...vectors,
    },
  })
  for (const [address, input] of offers)
    cfg.providers
      .find((p) => p.address === address)!
      .offers.push({
        model: id,
        upstreamModel: 'loom',
        input_price_per_mtok: String(input),
        output_price_per_mtok: '0',
        maxConcurrency: 64,
      })
}
