import type { FastifyInstance, FastifyReply } from 'fastify'
import { apiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { OperationError } from '../../accounts/operations.js'
import { addEndpoint, endpointView, offerFields, setOffer } from '../../accounts/provider-offers.js'
import type { Endpoint } from '../../store/providers.js'
import { sessionOf } from '../guard.js'
import { seconds, type PortalContext } from '../context.js'

type Body = Record<string, unknown> | undefined

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)

function endpointJson(e: Endpoint) {
  return { object: 'endpoint', ...endpointView(e), created: seconds(e.createdAt) }
}

/** Runs an operation, answering its OperationError as 400 feature_not_supported with its words. */
async function refusing(reply: FastifyReply, run: () => Promise<unknown>): Promise<unknown> {
  try {
    return await run()
  } catch (err) {
    if (err instanceof OperationError)
      return sendError(reply, apiError('feature_not_supported', err.message, { param: null }))
    throw err
  }
}

const noEndpoint = (id: string) =>
  apiError('feature_not_supported', `No live endpoint ${id} of this wallet.`, { param: 'endpoint_id', status: 404 })

/**
 * A provider wallet's endpoints and offers, signed in with the wallet: register an endpoint, set an offer (live once
 * the endpoint passes its probe), pause, resume or withdraw it, withdraw the endpoint. Gateways route to a change
 * within a few seconds; requests already routed finish where they are, charged and paid.
 */
export function providerOfferRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, now } = ctx
  const list = async (accountId: number) => (await store.providers.endpoints(accountId)).map(endpointJson)

  api.get('/provider/endpoints', async (req) => ({ object: 'list', data: await list(sessionOf(req).accountId) }))

  api.post<{ Body: Body }>('/provider/endpoints', async (req, reply) =>
    refusing(reply, async () => {
      const accountId = sessionOf(req).accountId
      const b = req.body ?? {}
      const id = await addEndpoint(
        store,
        {
          accountId,
          baseUrl: str(b.base_url) ?? '',
          apiKey: str(b.api_key) ?? null,
          bundle: str(b.bundle) ?? '',
          profile: str(b.profile) ?? '',
          now: now(),
        },
        ctx.catalog.addresses,
      )
      return reply.code(201).send((await list(accountId)).find((e) => e.id === id))
    }),
  )

  api.delete<{ Params: { id: string } }>('/provider/endpoints/:id', async (req, reply) => {
    if (!(await store.providers.withdrawEndpoint(sessionOf(req).accountId, req.params.id, now())))
      return sendError(reply, noEndpoint(req.params.id))
    return { object: 'endpoint', id: req.params.id, status: 'withdrawn' }
  })

  api.post<{ Params: { id: string }; Body: Body }>('/provider/endpoints/:id/offers', async (req, reply) =>
    refusing(reply, async () => {
      const accountId = sessionOf(req).accountId
      const b = req.body ?? {}
      const fields = offerFields({
        model: str(b.model) ?? '',
        upstreamModel: str(b.upstream_model),
        inputPrice: str(b.input_price_per_mtok) ?? String(b.input_price_per_mtok ?? ''),
        outputPrice: str(b.output_price_per_mtok) ?? String(b.output_price_per_mtok ?? ''),
        maxConcurrency: typeof b.max_concurrency === 'number' ? b.max_concurrency : undefined,
      })
      const { models, addresses } = ctx.catalog
      const at = { accountId, endpointId: req.params.id, models, now: now(), addresses }
      await setOffer(store, at, fields)
      return (await list(accountId)).find((e) => e.id === req.params.id)
    }),
  )

  for (const [action, status] of [
    ['pause', 'paused'],
    ['resume', 'live'],
    ['withdraw', 'withdrawn'],
  ] as const) {
    api.post<{ Params: { id: string }; Body: Body }>(`/provider/endpoints/:id/offers/${action}`, async (req, reply) => {
      const model = str(req.body?.model) ?? ''
      const at = { endpointId: req.params.id, model }
      // A model's name holds no control character (a NUL no store keeps): a name with one names no offer.
      const named = !/\p{Cc}/u.test(model)
      if (!named || !(await store.providers.setOfferStatus(sessionOf(req).accountId, at, status, now())))
        return sendError(
          reply,
          apiError(
            'feature_not_supported',
            `No offer of ${model} on a live endpoint ${req.params.id} of this wallet.`,
            {
              param: 'model',
              status: 404,
            },
          ),
        )
      return { object: 'offer', endpoint_id: req.params.id, model, status }
    })
  }
}
