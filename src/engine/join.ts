// A provider node joining a marketplace: it signs in to the marketplace's portal with its wallet (Sign-In with
// Ethereum), registers its endpoint and offers there, and withdraws the endpoint when it leaves. The marketplace
// probes the endpoint before an offer goes live.
import type { PrivateKeyAccount } from 'viem/accounts'
import { createSiweMessage } from 'viem/siwe'

export interface OfferTerms {
  /** The marketplace's model id (svc/…@…). */
  model: string
  /** The name the engine knows it by. */
  upstreamModel: string
  /** USDC per million tokens, as decimal strings. */
  inputPrice: string
  outputPrice: string
  maxConcurrency: number
}

export interface Membership {
  endpointId: string
  /** Withdraws the endpoint and its offers (requests in flight finish where they are). */
  leave(): Promise<void>
}

export class JoinRefused extends Error {}

/** What the marketplace answered, or why not, in one line. */
async function answer(res: Response, what: string): Promise<Record<string, unknown>> {
  const text = await res.text()
  let body: Record<string, unknown> = {}
  try {
    body = JSON.parse(text) as Record<string, unknown>
  } catch {
    // Not JSON: said by the status alone.
  }
  if (res.ok) return body
  const message = (body.error as { message?: unknown } | undefined)?.message
  throw new JoinRefused(`${what}: ${res.status} ${typeof message === 'string' ? message : text.slice(0, 200)}`)
}

/** Signs in to `marketplace` as `account`, registers `baseUrl` and offers `offers` on it. */
export async function joinMarketplace(o: {
  marketplace: string
  account: PrivateKeyAccount
  baseUrl: string
  bundle: string
  profile: string
  offers: OfferTerms[]
}): Promise<Membership> {
  const portal = `${o.marketplace.replace(/\/$/, '')}/portal/api`
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${portal}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
  const n = (await answer(await post('/nonce', {}), 'the marketplace gave no sign-in nonce')) as {
    nonce: string
    domain: string
    uri: string
    chain_id: number
    statement: string
  }
  const message = createSiweMessage({
    domain: n.domain,
    address: o.account.address,
    statement: n.statement,
    uri: n.uri,
    version: '1',
    chainId: n.chain_id,
    nonce: n.nonce,
    issuedAt: new Date(),
  })
  const signed = await post('/session', { message, signature: await o.account.signMessage({ message }) })
  const session = (await answer(signed, 'the marketplace refused the sign-in')) as { csrf_token: string }
  const cookie = (signed.headers.get('set-cookie') ?? '').split(';')[0]!
  const auth = { cookie, 'x-csrf-token': session.csrf_token }
  const endpoint = (await answer(
    await post('/provider/endpoints', { base_url: o.baseUrl, bundle: o.bundle, profile: o.profile }, auth),
    'the marketplace refused the endpoint',
  )) as { id: string }
  const leave = async () => {
    const res = await fetch(`${portal}/provider/endpoints/${encodeURIComponent(endpoint.id)}`, {
      method: 'DELETE',
      headers: auth,
    })
    await answer(res, 'the marketplace did not withdraw the endpoint')
  }
  try {
    for (const offer of o.offers) {
      const terms = {
        model: offer.model,
        upstream_model: offer.upstreamModel,
        input_price_per_mtok: offer.inputPrice,
        output_price_per_mtok: offer.outputPrice,
        max_concurrency: offer.maxConcurrency,
      }
      await answer(
        await post(`/provider/endpoints/${encodeURIComponent(endpoint.id)}/offers`, terms, auth),
        `the marketplace refused the offer of ${offer.model}`,
      )
    }
  } catch (err) {
    await leave().catch(() => {})
    throw err
  }
  return { endpointId: endpoint.id, leave }
}
