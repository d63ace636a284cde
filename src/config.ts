import { readFileSync } from 'node:fs'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { isEvmAddress } from './accounts/address.js'
import { Capabilities, ToolContract, CORTEX_MODEL_ID, MODEL_ID_PATTERN } from './protocol/models.js'
import { jsonPointerToPath } from './protocol/json-pointer.js'

/**
 * The config file (docs/architecture.md §9). This shape is a contract: outside tools write such files. Its objects are
 * closed: a field this shape does not name (most often a misspelt optional one, whose default would quietly apply) is
 * refused.
 */
const Closed = <T extends Parameters<typeof Type.Object>[0]>(properties: T) =>
  Type.Object(properties, { additionalProperties: false })

const UnitsString = Type.String({ pattern: '^[0-9]+$', description: 'USDC base units (6 decimals), as a string' })

const ModelConfig = Closed({
  id: Type.String({ pattern: MODEL_ID_PATTERN }),
  owned_by: Type.String({ minLength: 1 }),
  created: Type.Optional(Type.Integer({ minimum: 0 })),
  contextLimit: Type.Integer({ minimum: 1 }),
  capabilities: Closed(Capabilities.properties),
  tool_contract: Type.Optional(Closed(ToolContract.properties)),
})

const OfferConfig = Closed({
  model: Type.String({ minLength: 1 }),
  upstreamModel: Type.String({ minLength: 1 }),
  input_price_per_mtok: UnitsString,
  output_price_per_mtok: UnitsString,
  maxConcurrency: Type.Integer({ minimum: 1 }),
})

const ProviderConfig = Closed({
  address: Type.String(),
  baseUrl: Type.String({ pattern: '^https?://' }),
  apiKey: Type.Optional(Type.String()),
  bundle: Type.String({ minLength: 1 }),
  profile: Type.String({ minLength: 1 }),
  offers: Type.Array(OfferConfig),
})

const ManagedConfig = Closed({
  baseUrl: Type.String({ pattern: '^https?://' }),
  apiKey: Type.Optional(Type.String()),
  upstreamModel: Type.String({ minLength: 1 }),
  input_price_per_mtok: UnitsString,
  output_price_per_mtok: UnitsString,
  maxConcurrency: Type.Optional(Type.Integer({ minimum: 1 })),
  contextLimit: Type.Optional(
    Type.Integer({
      minimum: 1,
      description:
        "the vendor model's context window in tokens: longer requests are not sent to it (default: no limit)",
    }),
  ),
})

/** A store URL: the config's `store` and DATABASE_URL alike. */
export const STORE_URL = /^(sqlite:|postgres(ql)?:\/\/)/

const LocalRailConfig = Closed({ kind: Type.Literal('local') })
const EvmRailConfig = Closed({
  kind: Type.Literal('evm'),
  rpcUrl: Type.String({ pattern: '^(https?|wss?)://' }),
  chainId: Type.Integer({ minimum: 1 }),
  usdc: Type.String({ description: 'the USDC token (6 decimals)' }),
  settler: Type.String({ description: 'the BatchSettler contract; payers approve it' }),
  operatorKeyEnv: Type.Optional(
    Type.String({
      minLength: 1,
      description: 'environment variable holding the operator key (default SVC_OPERATOR_KEY)',
    }),
  ),
  confirmations: Type.Optional(
    Type.Integer({
      minimum: 0,
      description: 'blocks on top of the one with a batch before it counts as settled (default 1)',
    }),
  ),
  feeAccount: Type.Optional(Type.String({ description: 'address paid the marketplace fee (default: the operator)' })),
  vendorAccount: Type.Optional(
    Type.String({ description: 'address paid for managed-vendor charges (default: feeAccount)' }),
  ),
  pollMs: Type.Optional(
    Type.Integer({ minimum: 10, description: 'how often new blocks are looked for (default 1000)' }),
  ),
  maxLegs: Type.Optional(
    Type.Integer({ minimum: 2, description: 'most transfers in one batch transaction (default 200)' }),
  ),
  bumpAfterMs: Type.Optional(
    Type.Integer({
      minimum: 1,
      description: 'a batch not mined after this is re-sent with higher fees (default 30000)',
    }),
  ),
})
const RAIL_KINDS = { local: LocalRailConfig, evm: EvmRailConfig }
const RailConfig = Type.Union([LocalRailConfig, EvmRailConfig])

/** Timeouts and limits of the request path; every field has a default. */
const TuningConfig = Closed({
  firstByteTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  replyTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  idleTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  stallTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  keepAliveMs: Type.Optional(Type.Integer({ minimum: 1 })),
  breakerFailures: Type.Optional(Type.Integer({ minimum: 1 })),
  breakerCooldownMs: Type.Optional(Type.Integer({ minimum: 1 })),
  holdTtlSeconds: Type.Optional(Type.Integer({ minimum: 5 })),
  keyCacheMs: Type.Optional(Type.Integer({ minimum: 0 })),
  settleIntervalMs: Type.Optional(Type.Integer({ minimum: 0 })),
  requestTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  shutdownGraceMs: Type.Optional(Type.Integer({ minimum: 0 })),
  maxConnections: Type.Optional(Type.Integer({ minimum: 1 })),
  headTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  maxRequestsPerAccount: Type.Optional(Type.Integer({ minimum: 1 })),
  maxBodyBytesInFlight: Type.Optional(
    Type.Integer({ minimum: 4 * 1024 * 1024, description: 'at least the largest body (4 MiB)' }),
  ),
})

export const ConfigSchema = Closed({
  $schema: Type.Optional(Type.String({ description: 'a JSON Schema for editors; not read' })),
  listen: Type.Optional(
    Closed({
      host: Type.Optional(Type.String()),
      port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
      trustProxy: Type.Optional(
        Type.Union([Type.Boolean(), Type.String()], {
          description:
            'behind a reverse proxy: true (one proxy in front: the last X-Forwarded-For entry is the client), or the proxy addresses (comma-separated IPs/CIDRs) whose X-Forwarded-For/-Proto are believed',
        }),
      ),
    }),
  ),
  store: Type.String({ pattern: STORE_URL.source }),
  rail: RailConfig,
  feeBps: Type.Integer({ minimum: 0, maximum: 10_000 }),
  models: Type.Array(ModelConfig),
  providers: Type.Array(ProviderConfig),
  cortex: Type.Optional(Closed({ candidates: Type.Array(Type.String()) })),
  managed: Type.Optional(ManagedConfig),
  tuning: Type.Optional(TuningConfig),
  metrics: Type.Optional(
    Type.Union([
      Type.Literal(false),
      Closed({
        host: Type.Optional(Type.String()),
        port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
      }),
    ]),
  ),
  portal: Type.Optional(
    Closed({
      sessionSecret: Type.Optional(Type.String({ minLength: 16 })),
      chainId: Type.Optional(Type.Integer({ minimum: 1 })),
      signInsPerMinute: Type.Optional(
        Type.Integer({ minimum: 1, description: 'nonces one client address may ask for per minute (default 20)' }),
      ),
      origin: Type.Optional(
        Type.String({
          pattern: '^https?://',
          description:
            'the origin browsers reach the portal at (https://portal.example.com): sign-in messages must name it',
        }),
      ),
    }),
  ),
})
export type Config = Static<typeof ConfigSchema>
export type ModelConfig = Static<typeof ModelConfig>
export type ProviderConfig = Static<typeof ProviderConfig>
export type OfferConfig = Static<typeof OfferConfig>
export type ManagedConfig = Static<typeof ManagedConfig>
export type RailConfig = Static<typeof RailConfig>

export interface Tuning {
  firstByteTimeoutMs: number
  replyTimeoutMs: number
  idleTimeoutMs: number
  /**
   * Longest a stream waits for its client to take what it was sent. The upstream is not read meanwhile; past it the
   * client is taken as gone, and pays for what it was sent.
   */
  stallTimeoutMs: number
  keepAliveMs: number
  breakerFailures: number
  breakerCooldownMs: number
  holdTtlSeconds: number
  keyCacheMs: number
  settleIntervalMs: number
  /** How long a client may take to send a whole request (headers and body); a stream's reply is not bounded by it. */
  requestTimeoutMs: number
  /**
   * On stop, how long requests in flight may take to finish before their connections are cut (and charged for what they
   * delivered).
   */
  shutdownGraceMs: number
  /** Client connections open at once; past it the oldest that sent nothing yet is closed, else the new one. */
  maxConnections: number
  /** How long a connection may take to send a request's head (a new one, its first); past it, it is closed. */
  headTimeoutMs: number
  /** Chat requests one account may have in flight at this instance; one more is refused (503, retry). */
  maxRequestsPerAccount: number
  /**
   * Bytes of chat request bodies being read at once (by Content-Length; 4 MiB without one); past it a request is
   * refused (503, retry).
   */
  maxBodyBytesInFlight: number
}

export const DEFAULT_TUNING: Tuning = {
  firstByteTimeoutMs: 15_000,
  replyTimeoutMs: 300_000,
  idleTimeoutMs: 60_000,
  stallTimeoutMs: 60_000,
  keepAliveMs: 10_000,
  breakerFailures: 3,
  breakerCooldownMs: 5_000,
  holdTtlSeconds: 600,
  keyCacheMs: 2_000,
  settleIntervalMs: 60_000,
  requestTimeoutMs: 120_000,
  shutdownGraceMs: 10_000,
  maxConnections: 4096,
  headTimeoutMs: 10_000,
  maxRequestsPerAccount: 64,
  // Four times what one account's bodies can take (maxRequestsPerAccount × 4 MiB).
  maxBodyBytesInFlight: 1024 * 1024 * 1024,
}

export function tuningOf(config: Config): Tuning {
  return { ...DEFAULT_TUNING, ...config.tuning }
}

export class ConfigError extends Error {
  constructor(
    readonly problems: string[],
    source: string,
  ) {
    super(`invalid config ${source}:\n${problems.map((p) => `  - ${p}`).join('\n')}`)
  }
}

const checker = TypeCompiler.Compile(ConfigSchema)

function schemaProblems(schema: TSchema, value: unknown): string[] {
  const seen = new Set<string>()
  const problems: string[] = []
  for (const e of TypeCompiler.Compile(schema).Errors(value)) {
    const path = jsonPointerToPath(e.path)
    if (seen.has(path)) continue
    seen.add(path)
    // A rail of a known kind is checked as that kind, so the message names its field, not only "Expected union value".
    const rail = path === 'rail' ? railProblems((value as { rail?: unknown }).rail) : undefined
    const choices = literalChoices(e.schema)
    problems.push(...(rail ?? [choices ? `${path}: must be one of ${choices}` : `${path}: ${e.message}`]))
  }
  return problems
}

/** The values a union of literals allows, in words (`"chat", "embedding"`); undefined for any other schema. */
function literalChoices(schema: TSchema): string | undefined {
  const options = (schema as { anyOf?: { const?: unknown }[] }).anyOf
  if (!options?.length || !options.every((o) => Object.hasOwn(o, 'const'))) return undefined
  return options.map((o) => JSON.stringify(o.const)).join(', ')
}

function railProblems(rail: unknown): string[] {
  if (rail === undefined) return ['rail: required ({"kind": "local"} or {"kind": "evm", …})']
  const kind = (rail as { kind?: unknown } | null)?.kind
  const schema =
    typeof kind === 'string' && Object.hasOwn(RAIL_KINDS, kind)
      ? RAIL_KINDS[kind as keyof typeof RAIL_KINDS]
      : undefined
  if (!schema)
    return [
      `rail.kind: must be one of ${Object.keys(RAIL_KINDS)
        .map((k) => `"${k}"`)
        .join(', ')}`,
    ]
  return schemaProblems(schema, rail).map((p) => `rail.${p}`)
}

function isBareOrigin(text: string): boolean {
  try {
    const url = new URL(text)
    return (url.protocol === 'http:' || url.protocol === 'https:') && text.replace(/\/$/, '') === url.origin
  } catch {
    return false
  }
}

/** Cross-field rules the schema cannot state. */
function semanticProblems(config: Config): string[] {
  const problems: string[] = []
  const ids = new Set<string>()
  config.models.forEach((m, i) => {
    if (m.id === CORTEX_MODEL_ID)
      problems.push(`models[${i}].id: ${CORTEX_MODEL_ID} is the routing model and cannot be configured`)
    if (ids.has(m.id)) problems.push(`models[${i}].id: duplicate model id ${m.id}`)
    ids.add(m.id)
    if (m.capabilities.tools && !m.tool_contract)
      problems.push(`models[${i}].tool_contract: required when capabilities.tools is true`)
    if (m.capabilities.maxOutputTokens > m.contextLimit)
      problems.push(`models[${i}].capabilities.maxOutputTokens: larger than contextLimit`)
  })
  const addresses = new Set<string>()
  config.providers.forEach((p, i) => {
    if (!isEvmAddress(p.address)) problems.push(`providers[${i}].address: not an EVM address`)
    if (addresses.has(p.address.toLowerCase())) problems.push(`providers[${i}].address: duplicate provider address`)
    addresses.add(p.address.toLowerCase())
    p.offers.forEach((o, j) => {
      if (!ids.has(o.model)) problems.push(`providers[${i}].offers[${j}].model: unknown model ${o.model}`)
    })
  })
  config.cortex?.candidates.forEach((c, i) => {
    if (!ids.has(c)) problems.push(`cortex.candidates[${i}]: unknown model ${c}`)
  })
  const origin = config.portal?.origin
  if (origin !== undefined && !isBareOrigin(origin))
    problems.push('portal.origin: not an origin (scheme, host and optional port, nothing after them)')
  if (config.rail.kind === 'evm') {
    if (!isEvmAddress(config.rail.usdc)) problems.push('rail.usdc: not an EVM address')
    if (!isEvmAddress(config.rail.settler)) problems.push('rail.settler: not an EVM address')
    for (const f of ['feeAccount', 'vendorAccount'] as const) {
      const v = config.rail[f]
      if (v !== undefined && !isEvmAddress(v)) problems.push(`rail.${f}: not an EVM address`)
    }
  }
  return problems
}

/** Validates a parsed config object; throws ConfigError listing one message per bad field. */
export function validateConfig(value: unknown, source = '(inline)'): Config {
  if (!checker.Check(value)) throw new ConfigError(schemaProblems(ConfigSchema, value), source)
  const problems = semanticProblems(value)
  if (problems.length) throw new ConfigError(problems, source)
  return value
}

/** Reads and validates the config file; DATABASE_URL and PORT override when set. */
export function loadConfig(path: string, env: NodeJS.ProcessEnv = process.env): Config {
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'))
  } catch (err) {
    throw new ConfigError([`cannot read: ${(err as Error).message}`], path)
  }
  const config = validateConfig(raw, path)
  return applyEnv(config, env)
}

/**
 * DATABASE_URL and PORT over the config, checked as the config's own fields are (a ConfigError naming the variable).
 */
export function applyEnv(config: Config, env: NodeJS.ProcessEnv): Config {
  const out = { ...config, listen: { ...config.listen } }
  const problems: string[] = []
  if (env.DATABASE_URL) {
    if (STORE_URL.test(env.DATABASE_URL)) out.store = env.DATABASE_URL
    else problems.push('DATABASE_URL: must start with sqlite: or postgres://')
  }
  if (env.PORT) {
    if (/^\d{1,5}$/.test(env.PORT) && Number(env.PORT) <= 65535) out.listen.port = Number(env.PORT)
    else problems.push(`PORT: must be a port number from 0 to 65535, got ${env.PORT}`)
  }
  if (problems.length) throw new ConfigError(problems, 'environment')
  return out
}
