import type { FastifyInstance } from 'fastify'
import { apiError, clipped } from '../../protocol/errors.js'
import { sendError } from '../errors.js'
import { modelList, type ModelSource } from '../../gateway/model-list.js'
import { endpointsOf } from '../../gateway/model-endpoints.js'

export function modelRoutes(app: FastifyInstance, source: ModelSource, now: () => number): void {
  const created = Math.floor(now() / 1000)
  app.get('/v1/models', async (_req, reply) => {
    reply.header('content-type', 'application/json; charset=utf-8')
    return JSON.stringify(modelList(source, created))
  })
  // One model, as the SDKs' `models.retrieve` asks: the id's slash may come encoded (svc%2Fatlas@1, which the router
  // decodes) or not.
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (req, reply) => {
    const id = req.params['*']
    if (id === '')
      return sendError(
        reply,
        apiError('feature_not_supported', 'Unknown endpoint GET /v1/models/; GET /v1/models lists the models.', {
          param: null,
          status: 404,
        }),
      )
    // A model's endpoints: its offers with their measured latency, throughput and uptime.
    const endpoints = id.endsWith('/endpoints') ? endpointsOf(source, id.slice(0, -'/endpoints'.length)) : undefined
    if (endpoints) {
      reply.header('content-type', 'application/json; charset=utf-8')
      return JSON.stringify(endpoints)
    }
    const model = modelList(source, created).data.find((m) => m.id === id)
    if (!model)
      return sendError(
        reply,
        apiError('model_not_found', `The model ${clipped(id)} does not exist; GET /v1/models lists them.`, {
          param: 'model',
        }),
      )
    reply.header('content-type', 'application/json; charset=utf-8')
    return JSON.stringify(model)
  })
}
