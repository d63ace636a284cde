import { Type, type Static } from '@sinclair/typebox'
import { Capabilities, ToolContract, MODEL_ID_PATTERN } from './protocol/models.js'

/** Kinds of non-public address an operator may let providers' endpoints use (`providerEndpoints.allowAddresses`). */
export const ADDRESS_CLASSES = ['loopback', 'private', 'link-local'] as const
export type AddressClass = (typeof ADDRESS_CLASSES)[number]

/**
 * The config file (docs/architecture.md §9). This shape is a contract: outside tools write such files. Its objects are
 * closed: a field this shape does not name (most often a misspelt optional one, whose default would quietly apply) is
 * refused.
 */
const Closed = <T extends Parameters<typeof Type.Object>[0]>(properties: T, options: { description?: string } = {}) =>
  Type.Object(properties, { ...options, additionalProperties: false })

const UnitsString = Type.String({ pattern: '^[0-9]+$', description: 'USDC base units (6 decimals), as a string' })

const ModelConfig = Closed({
  id: Type.String({ pattern: MODEL_ID_PATTERN }),
  owned_by: Type.String({ minLength: 1 }),
  created: Type.Optional(Type.Integer({ minimum: 0 })),
  contextLimit: Type.Integer({ minimum: 1 }),
  capabilities: Closed(Capabilities.properties),
  tool_contract: Type.Optional(Closed(ToolContract.properties)),
  /**
   * The model's own tokenizer, which its usage is metered in (metering version 2): a GGUF file (`gguf:<path>` or a
   * path ending in .gguf, relative to the working directory). Absent or `o200k`: o200k (metering version 1).
   */
  tokenizer: Type.Optional(Type.String({ minLength: 1 })),
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
  x402: Type.Optional(
    Closed(
      {
        relayerKeyEnv: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              'environment variable holding the key that sends x402 transfers and pays their gas (default: the operator key; a key of its own keeps its nonces apart from the batches)',
          }),
        ),
        maxTimeoutSeconds: Type.Optional(
          Type.Integer({
            minimum: 30,
            maximum: 86_400,
            description: 'how long a signed payment may stay valid, as the requirements say (default 300)',
          }),
        ),
      },
      { description: 'requests without a key are paid per request with x402 (docs/interface.md "x402")' },
    ),
  ),
})
export const RAIL_KINDS = { local: LocalRailConfig, evm: EvmRailConfig }
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
  offerProbeIntervalMs: Type.Optional(Type.Integer({ minimum: 0 })),
})

/** An RFC 3339 date-time (2026-11-29T00:00:00Z). */
const DATE_TIME = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?(Z|[+-]\\d{2}:\\d{2})$'

/** The receipt signing key and the signers it replaced (docs/architecture.md, "Receipts"). */
const ReceiptsConfig = Closed({
  keyFile: Type.Optional(
    Type.String({ minLength: 1, description: 'file holding the receipt key (0x and 64 hex digits); read at start' }),
  ),
  keyEnv: Type.Optional(
    Type.String({
      minLength: 1,
      description: 'environment variable holding the receipt key, when no keyFile (default SVC_RECEIPT_KEY)',
    }),
  ),
  validFrom: Type.Optional(
    Type.String({ pattern: DATE_TIME, description: 'when the current key began signing (published with it)' }),
  ),
  retired: Type.Optional(
    Type.Array(
      Closed({
        address: Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' }),
        validFrom: Type.String({ pattern: DATE_TIME }),
        validUntil: Type.String({ pattern: DATE_TIME }),
      }),
      { description: 'earlier receipt signers, still published so that the receipts they signed verify' },
    ),
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
  receipts: Type.Optional(ReceiptsConfig),
  providerEndpoints: Type.Optional(
    Closed({
      allowAddresses: Type.Optional(
        Type.Array(Type.Union(ADDRESS_CLASSES.map((c) => Type.Literal(c))), {
          description:
            'non-public addresses the endpoints wallets register may be reached at (default none: public addresses only)',
        }),
      ),
    }),
  ),
  secrets: Type.Optional(
    Closed({
      keyFile: Type.Optional(
        Type.String({
          minLength: 1,
          description: "file holding the key providers' API keys are sealed with (64 hex digits; older keys after it)",
        }),
      ),
      keyEnv: Type.Optional(
        Type.String({
          minLength: 1,
          description: 'environment variable holding it, when no keyFile (SVC_SECRETS_KEY)',
        }),
      ),
    }),
  ),
  limits: Type.Optional(
    Closed({
      /** Where per-key rates are counted across gateway processes (`redis://host:port`); else in the store. */
      redis: Type.Optional(Type.String({ pattern: '^rediss?://' })),
      onRedisDown: Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('closed')])),
    }),
  ),
  metrics: Type.Optional(
    Type.Union([
      Type.Literal(false),
      Closed({
        host: Type.Optional(Type.String()),
        port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
      }),
    ]),
  ),
  audit: Type.Optional(
    Closed({
      wallet: Type.String({
        description: "the marketplace's audit account: audits are charged to it and paid to providers like any request",
      }),
      references: Type.Record(Type.String(), Type.String(), {
        description: 'by model id, the provider address whose offer is its reference (audits compare with it)',
      }),
      intervalMs: Type.Optional(
        Type.Integer({ minimum: 0, description: 'time between two audits of one offer (default 600000; 0: none)' }),
      ),
      maxTokens: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 256, description: 'the output bound of an audit request (default 24)' }),
      ),
      prompts: Type.Optional(Type.String({ description: 'a JSON file of more audit prompts: [{"id", "messages"}]' })),
    }),
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
