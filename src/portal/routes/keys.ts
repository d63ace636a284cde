import type { FastifyInstance } from 'fastify'
import { apiError, clipped, isApiError } from '../../protocol/errors.js'
import { sendError } from '../../api/errors.js'
import { issueKey, keyNameProblem, OperationError } from '../../accounts/operations.js'
import { type ApiKey } from '../../store/keys.js'
import { NO_LIMITS } from '../../limits/limits.js'
import { limitsFromBody, type LimitsBody } from './key-limits-body.js'
import { limitsView, spendView } from '../../usage/key-limits.js'
import { sessionOf } from '../guard.js'
import { accountOf, seconds, type PortalContext } from '../context.js'

/** Live keys per account: enough for any real use, a bound on what a session can create. */
const MAX_LIVE_KEYS = 50

function keyView(k: ApiKey, now: number) {
  return {
    object: 'api_key',
    id: k.id,
    prefix: k.prefix,
    name: k.name,
    created: seconds(k.createdAt),
    last_used: seconds(k.lastUsedAt),
    revoked: seconds(k.revokedAt),
    ...spendView(k, now),
    ...limitsView(k.limits),
  }
}

/** The signed-in account's API keys: list, create (the secret is in this one response only), revoke. */
export function keyRoutes(api: FastifyInstance, ctx: PortalContext): void {
  const { store, keys: verifier, now } = ctx

  api.get('/keys', async (req) => {
    // Last-used times are batched in memory; write them so the list is current.
    await verifier.flushLastUsed()
    const keys = await store.keys.list(sessionOf(req).accountId)
    return { object: 'list', data: keys.map((k) => keyView(k, now())) }
  })

  api.post<{ Body: ({ name?: unknown } & LimitsBody) | undefined }>('/keys', async (req, reply) => {
    const session = sessionOf(req)
    const name = typeof req.body?.name === 'string' ? req.body.name : ''
    const problem = keyNameProblem(name)
    if (problem) return sendError(reply, apiError('feature_not_supported', `${problem}.`, { param: 'name' }))
    const limits = limitsFromBody(req.body, NO_LIMITS)
    if (isApiError(limits)) return sendError(reply, limits)
    const account = await accountOf(ctx, session.accountId)
    if (account.status !== 'active')
      return sendError(reply, apiError('account_suspended', 'This account is suspended; it cannot create keys.'))
    let k: Awaited<ReturnType<typeof issueKey>>
    try {
      k = await issueKey({ store, accountId: account.id, name, now: now(), maxLive: MAX_LIVE_KEYS, limits })
    } catch (err) {
      if (err instanceof OperationError)
        return sendError(reply, apiError('feature_not_supported', err.message, { param: null }))
      throw err
    }
    return reply.code(201).send({
      object: 'api_key',
      id: k.id,
      api_key: k.key,
      prefix: k.prefix,
      name: k.name,
      created: seconds(k.createdAt),
      last_used: null,
      revoked: null,
      ...limitsView(limits),
    })
  })

  api.patch<{ Params: { id: string }; Body: LimitsBody | undefined }>('/keys/:id', async (req, reply) => {
    const session = sessionOf(req)
    const key = (await store.keys.list(session.accountId)).find((k) => k.id === req.params.id && !k.revokedAt)
    if (!key) return sendError(reply, noLiveKey(req.params.id))
    const limits = limitsFromBody(req.body, key.limits)
    if (isApiError(limits)) return sendError(reply, limits)
    if (!(await store.keys.setLimits(session.accountId, key.id, limits, now())))
      return sendError(reply, noLiveKey(req.params.id))
    // Cached verifications carry the old limits for up to keyCacheMs in this process.
    verifier.invalidate()
    const changed = (await store.keys.list(session.accountId)).find((k) => k.id === key.id)
    return keyView(changed ?? { ...key, limits }, now())
  })

  api.delete<{ Params: { id: string } }>('/keys/:id', async (req, reply) => {
    const session = sessionOf(req)
    if (!(await store.keys.revoke(session.accountId, req.params.id, now()))) {
      return sendError(reply, noLiveKey(req.params.id))
    }
    // Cached verifications would let the key work for up to keyCacheMs more in this process.
    verifier.invalidate()
    return { object: 'api_key', id: req.params.id, revoked: true }
  })
}

const noLiveKey = (id: string) =>
  apiError('feature_not_supported', `This account has no live key ${clipped(id)}.`, { param: 'key_id', status: 404 })
