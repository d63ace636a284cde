import type { Config } from '../../config-schema.js'
import type { ToolContract } from '../../protocol/models.js'
import type { Behaviours } from '../../providers/simulated/behaviour.js'

/** The demo marketplace: three chat models from four simulated providers at different prices, and a vendor. */

// Addresses of the well-known local test accounts (anvil's first five); none of them holds anything of value.
export const DEMO_WALLET = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
export const DEMO_PROVIDERS = [
  '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
  '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
  '0x15d34AAf54267DB7D8c367839AAf71A00a2C6A65',
] as const

/**
 * What the demo's simulated upstreams can do with tools, per upstream model: atlas everything; tern refuses
 * tool_choice required and named and strict schemas, calls one tool at a time, cuts argument documents past
 * 16 KiB, sheds load past 8 concurrent requests (answering after 100 ms) and calls tools again after a result.
 */
export const DEMO_SIM_MODELS: Behaviours = {
  tern: {
    toolChoice: ['auto', 'none'],
    parallel: false,
    strict: false,
    maxArgumentBytes: 16384,
    maxConcurrency: 8,
    agentic: false,
    latencyMs: 100,
  },
}

/**
 * Contracts of the demo models: exactly what `svc certify` earns against the demo's simulated upstreams
 * (test/certify.test.ts certifies them and fails when these differ; see README, Tool calling).
 */
export const DEMO_CONTRACTS: Record<'atlas' | 'tern', ToolContract> = {
  atlas: {
    tool_choice: ['auto', 'none', 'required', 'named'],
    parallel_tool_calls: true,
    strict_schemas: true,
    tool_streaming: 'whole-call',
    max_argument_bytes: 65536,
    certified_concurrency: 32,
    agentic_certified: true,
    metering_version: 1,
    certification_id: 'cert-1a16b745b8b87fc2',
  },
  tern: {
    tool_choice: ['auto', 'none'],
    parallel_tool_calls: false,
    strict_schemas: false,
    tool_streaming: 'whole-call',
    max_argument_bytes: 16384,
    certified_concurrency: 8,
    agentic_certified: false,
    metering_version: 1,
    certification_id: 'cert-b7936cd96afcb197',
  },
}

/** The demo's embedding model (simulated vectors of 16 numbers, which a request may ask shorter). */
export const DEMO_EMBEDDING_MODEL = 'svc/loom-embed@1'

export interface DemoUpstreams {
  /** Base URLs (ending in /v1) of four simulated providers and the simulated vendor. */
  providers: [string, string, string, string]
  vendor: string
}

export function demoConfig(up: DemoUpstreams, storeUrl: string, port: number, contracts = DEMO_CONTRACTS): Config {
  const offer = (model: string, upstreamModel: string, input: number, output: number) => ({
    model,
    upstreamModel,
    input_price_per_mtok: String(input),
    output_price_per_mtok: String(output),
    maxConcurrency: 64,
  })
  const caps = (tools: boolean, maxOutputTokens: number) => ({
    workload: 'chat' as const,
    tools,
    structuredOutputs: tools,
    reasoning: false,
    streaming: true,
    maxOutputTokens,
  })
  const [a, b, c, d] = DEMO_PROVIDERS
  return {
    listen: { host: '127.0.0.1', port },
    store: storeUrl,
    rail: { kind: 'local' },
    feeBps: 500,
    // The demo's providers, and those a demo user registers, run on this machine.
    providerEndpoints: { allowAddresses: ['loopback'] },
    models: [
      {
        id: 'svc/atlas@1',
        owned_by: 'atlas-labs',
        contextLimit: 32768,
        capabilities: caps(true, 4096),
        tool_contract: contracts.atlas,
      },
      {
        id: 'svc/tern@2',
        owned_by: 'tern-ai',
        contextLimit: 16384,
        capabilities: caps(true, 2048),
        tool_contract: contracts.tern,
      },
      { id: 'svc/wren@1', owned_by: 'wren-collective', contextLimit: 2048, capabilities: caps(false, 512) },
      {
        id: DEMO_EMBEDDING_MODEL,
        owned_by: 'loom',
        contextLimit: 8192,
        capabilities: { ...caps(false, 1), workload: 'embedding', streaming: false, dimensions: 16, shortenable: true },
      },
    ],
    providers: [
      {
        address: a,
        baseUrl: up.providers[0],
        bundle: 'vllm-0.6',
        profile: 'h100-fp8',
        offers: [offer('svc/atlas@1', 'atlas', 150_000, 600_000)],
      },
      {
        address: b,
        baseUrl: up.providers[1],
        bundle: 'sglang-0.4',
        profile: 'a100-bf16',
        offers: [offer('svc/atlas@1', 'atlas', 200_000, 800_000), offer('svc/tern@2', 'tern', 120_000, 480_000)],
      },
      {
        address: c,
        baseUrl: up.providers[2],
        bundle: 'tgi-2.3',
        profile: 'l40s-fp8',
        offers: [offer('svc/tern@2', 'tern', 100_000, 400_000), offer(DEMO_EMBEDDING_MODEL, 'loom-embed', 20_000, 0)],
      },
      {
        address: d,
        baseUrl: up.providers[3],
        bundle: 'llamacpp-b3',
        profile: 'cpu-q4',
        offers: [offer('svc/wren@1', 'wren', 30_000, 60_000)],
      },
    ],
    cortex: { candidates: ['svc/atlas@1', 'svc/tern@2', 'svc/wren@1'] },
    managed: {
      baseUrl: up.vendor,
      upstreamModel: 'vendor-large',
      input_price_per_mtok: '3000000',
      output_price_per_mtok: '15000000',
      contextLimit: 131072,
    },
    tuning: { settleIntervalMs: 30_000 },
  }
}
