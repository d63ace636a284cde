import type { Command } from 'commander'
import { normalizeWallet, OperationError, requireAccount } from '../../accounts/operations.js'
import { addEndpoint, endpointView, offerFields, setOffer } from '../../accounts/provider-offers.js'
import { addressPolicyOf } from '../../routing/catalog.js'
import { listModels } from '../../providers/engine-models.js'
import { providerServeCommand } from './provider-serve.js'
import { action, common, emit, withStore, wholeOption, type CommonOptions } from '../context.js'
import type { Store } from '../../store/store.js'

interface ProviderOptions extends CommonOptions {
  wallet: string
  id?: string
  endpoint?: string
  baseUrl?: string
  apiKeyEnv?: string
  bundle?: string
  profile?: string
  model?: string
  upstreamModel?: string
  inputPrice?: string
  outputPrice?: string
  maxConcurrency?: string
}

/** What the audits found of a provider's offers, by model (none before its first audit). */
type Verifications = Map<string, { state: string; passed: number; failed: number }>

/** An endpoint with each offer's verification state (`unverified` before any audit). */
const view = (e: Parameters<typeof endpointView>[0], states: Verifications) => {
  const v = endpointView(e)
  return {
    ...v,
    offers: v.offers.map((o) => {
      const s = states.get(o.model)
      return {
        ...o,
        verification: s
          ? { state: s.state, audits_1d: { passed: s.passed, failed: s.failed } }
          : { state: 'unverified', audits_1d: { passed: 0, failed: 0 } },
      }
    }),
  }
}

async function verificationsOf(store: Store, address: string): Promise<Verifications> {
  const rows = (await store.audits.states()).filter((s) => s.provider.toLowerCase() === address.toLowerCase())
  return new Map(rows.map((s) => [s.model, s]))
}

const lines = (e: ReturnType<typeof view>) => [
  `${e.id}  ${e.status.padEnd(9)} ${e.base_url}  (${e.bundle}:${e.profile})`,
  ...e.offers.map(
    (o) =>
      `  ${o.model.padEnd(16)} ${o.status.padEnd(9)} as ${o.upstream_model}: ${o.input_price_per_mtok} in, ` +
      `${o.output_price_per_mtok} out USDC/Mtok, ${o.max_concurrency} at once; ${o.verification.state} ` +
      `(audits today: ${o.verification.audits_1d.passed} passed, ${o.verification.audits_1d.failed} failed)`,
  ),
]

/** `svc provider endpoint add|list|remove`, `svc provider offer set|pause|resume|withdraw`: for a provider wallet. */
export function providerCommands(program: Command): void {
  const provider = program.command('provider').description("a provider wallet's endpoints and offers, live")
  const endpoint = provider.command('endpoint').description('OpenAI-compatible endpoints of a provider')
  const offer = provider.command('offer').description('what an endpoint serves, at what price')
  const wallet = (c: Command) => common(c.requiredOption('--wallet <address>', 'the provider wallet'))
  providerServeCommand(provider)

  wallet(endpoint.command('add'))
    .requiredOption('--base-url <url>', 'its OpenAI-compatible API, ending in /v1')
    .option('--api-key-env <name>', 'environment variable holding the key it takes (stored, never shown)')
    .requiredOption('--bundle <name>', 'serving software, for system_fingerprint (e.g. vllm-0.6)')
    .requiredOption('--profile <name>', 'its configuration, for system_fingerprint')
    .description(
      'register an endpoint and list the models its engine reports; its offers go live with `svc provider offer set`',
    )
    .action(
      action(async (o: ProviderOptions) =>
        withStore(
          o,
          async (store, config) => {
            const apiKey = o.apiKeyEnv ? process.env[o.apiKeyEnv] : undefined
            if (o.apiKeyEnv && !apiKey) throw new OperationError(`${o.apiKeyEnv} is not set`)
            const { account } = await store.accounts.ensure(normalizeWallet(o.wallet), 'provider', Date.now())
            const e = { accountId: account.id, baseUrl: o.baseUrl!, bundle: o.bundle!, profile: o.profile! }
            const id = await addEndpoint(
              store,
              { ...e, apiKey: apiKey ?? null, now: Date.now() },
              addressPolicyOf(config),
            )
            // What the engine says it serves, for `offer set --upstream-model`: told, never required.
            const served = await listModels(o.baseUrl!, { apiKey, addresses: addressPolicyOf(config), timeoutMs: 5000 })
            const models = 'models' in served ? served.models : null
            const said =
              models === null
                ? `its model list is unknown: ${(served as { error: string }).error}`
                : models.length
                  ? `serves ${models.join(', ')}`
                  : 'its model list is empty'
            emit(o, { id, wallet: account.address, base_url: o.baseUrl, models }, [`${id} (${o.baseUrl})`, `  ${said}`])
          },
          { create: true },
        ),
      ),
    )

  wallet(endpoint.command('list'))
    .description("a provider's endpoints and their offers")
    .action(
      action(async (o: ProviderOptions) =>
        withStore(o, async (store) => {
          const a = await requireAccount(store, o.wallet)
          const states = await verificationsOf(store, a.address)
          const data = (await store.providers.endpoints(a.id)).map((e) => view(e, states))
          emit(o, { wallet: a.address, endpoints: data }, data.length ? data.flatMap(lines) : 'no endpoints')
        }),
      ),
    )

  wallet(endpoint.command('remove'))
    .requiredOption('--id <endpoint_id>', 'from svc provider endpoint list')
    .description('withdraw an endpoint and its offers (requests in flight finish, charged and paid)')
    .action(
      action(async (o: ProviderOptions) =>
        withStore(o, async (store) => {
          const a = await requireAccount(store, o.wallet)
          if (!(await store.providers.withdrawEndpoint(a.id, o.id!, Date.now())))
            throw new OperationError(`no live endpoint ${o.id} of ${a.address}`)
          emit(o, { id: o.id, status: 'withdrawn' }, `withdrew ${o.id}`)
        }),
      ),
    )

  wallet(offer.command('set'))
    .requiredOption('--endpoint <id>', 'the endpoint that serves it')
    .requiredOption('--model <id>', 'a model of this marketplace (svc/…@…)')
    .option('--upstream-model <name>', 'the name the endpoint knows it by (default: the model id)')
    .requiredOption('--input-price <usdc>', 'USDC per million input tokens')
    .requiredOption('--output-price <usdc>', 'USDC per million output tokens')
    .option('--max-concurrency <n>', 'requests at once', '64')
    .description('offer a model at a price, live once the endpoint passes its probe (or reprice it)')
    .action(
      action(async (o: ProviderOptions) =>
        withStore(o, async (store, config) => {
          const a = await requireAccount(store, o.wallet)
          const fields = offerFields({
            model: o.model!,
            upstreamModel: o.upstreamModel,
            inputPrice: o.inputPrice!,
            outputPrice: o.outputPrice!,
            maxConcurrency: wholeOption('--max-concurrency', o.maxConcurrency!, 4096),
          })
          const models = new Map(config.models.map((m) => [m.id, m]))
          const addresses = addressPolicyOf(config)
          const at = { accountId: a.id, endpointId: o.endpoint!, models, now: Date.now(), addresses }
          await setOffer(store, at, fields)
          emit(o, { endpoint_id: o.endpoint, model: o.model, status: 'live' }, `${o.model} on ${o.endpoint}: live`)
        }),
      ),
    )

  common(provider.command('reseal'))
    .description(
      "seal every provider API key in the store with the secrets key's first key (after a rotation, or an upgrade)",
    )
    .action(
      action(async (o: CommonOptions) =>
        withStore(o, async (store) => {
          const { sealed, unreadable } = await store.providers.keys.reseal().catch((err: Error) => {
            throw new OperationError(err.message)
          })
          emit(o, { sealed, unreadable }, [
            `sealed ${sealed} API key${sealed === 1 ? '' : 's'} with the current secrets key`,
            ...unreadable.map((why) => `left as it is: ${why}`),
          ])
          if (unreadable.length) process.exitCode = 1
        }),
      ),
    )

  for (const [name, status] of [
    ['pause', 'paused'],
    ['resume', 'live'],
    ['withdraw', 'withdrawn'],
  ] as const) {
    wallet(offer.command(name))
      .requiredOption('--endpoint <id>', 'the endpoint that serves it')
      .requiredOption('--model <id>', 'the model')
      .description(`${name} an offer (gateways see it within seconds; requests in flight finish)`)
      .action(
        action(async (o: ProviderOptions) =>
          withStore(o, async (store) => {
            const a = await requireAccount(store, o.wallet)
            const at = { endpointId: o.endpoint!, model: o.model! }
            if (!(await store.providers.setOfferStatus(a.id, at, status, Date.now())))
              throw new OperationError(`no offer of ${o.model} on a live endpoint ${o.endpoint} of ${a.address}`)
            emit(o, { endpoint_id: o.endpoint, model: o.model, status }, `${o.model} on ${o.endpoint}: ${status}`)
          }),
        ),
      )
  }
}
