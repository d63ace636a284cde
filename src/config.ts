import { readFileSync } from 'node:fs'
import { type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { isEvmAddress } from './protocol/address.js'
import { CORTEX_MODEL_ID } from './protocol/models.js'
import { jsonPointerToPath } from './protocol/json-pointer.js'
import { ConfigSchema, RAIL_KINDS, STORE_URL, type Config } from './config-schema.js'

/** Validation and loading of the config file; its shape is config-schema.ts, its request-path tuning tuning.ts. */
// Re-exported for the modules that import them from here (the gateway and the chat route).
export type { Config } from './config-schema.js'
export { tuningOf, type Tuning } from './tuning.js'

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
    const version = m.tokenizer === undefined || m.tokenizer === 'o200k' ? 1 : 2
    if (m.tool_contract && m.tool_contract.metering_version !== version)
      problems.push(
        `models[${i}].tool_contract.metering_version: ${version} for a model ${version === 1 ? 'metered in o200k' : 'that names its tokenizer'}, not ${m.tool_contract.metering_version}`,
      )
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
  if (config.audit && !isEvmAddress(config.audit.wallet)) problems.push('audit.wallet: not an EVM address')
  Object.entries(config.audit?.references ?? {}).forEach(([model, address]) => {
    if (!ids.has(model)) problems.push(`audit.references: unknown model ${model}`)
    if (!isEvmAddress(address)) problems.push(`audit.references.${model}: not an EVM address`)
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
