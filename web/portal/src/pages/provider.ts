import { api, ApiError, type ProviderView } from '../api.js'
import { endpointsSection } from './provider-endpoints.js'
import { dataTable, h, mount } from '../dom.js'
import { count, perMtok, usd, when } from '../format.js'
import type { App } from '../main.js'

/**
 * For provider wallets: offers as routed now, requests served, earned, and payouts settled and pending; for every
 * wallet, its endpoints and offers, to serve models.
 */
export async function providerPage(app: App, root: HTMLElement): Promise<void> {
  const summary = h('div', {})
  const render = async () => {
    const p = await api<ProviderView>('GET', '/provider').catch((err: unknown) => {
      if (err instanceof ApiError && err.status === 404) return null
      throw err
    })
    if (p) mount(summary, ...summaryOf(p))
    else
      mount(
        summary,
        h('p', { class: 'lead' }, 'This wallet serves no model yet: register an endpoint, then offer a model.'),
      )
  }
  await render()
  mount(root, summary, await endpointsSection(app, render))
}

const STATE_BADGE = { verified: 'good', unverified: '', suspect: 'warn', quarantined: 'warn' } as const

/** An offer's verification: its state, its audits of the last day, and why it is suspect or quarantined. */
function verificationCell(v: ProviderView['offers'][number]['verification']): HTMLElement[] {
  const out = [
    h('span', { class: `badge ${STATE_BADGE[v.state]}` }, v.reference ? 'reference' : v.state),
    h('div', { class: 'muted' }, `${v.audits_1d.passed} passed, ${v.audits_1d.failed} failed today`),
  ]
  if (v.last_failed)
    out.push(
      h(
        'div',
        { class: 'muted', 'data-finding': v.last_failed.audit_id },
        `Audit ${v.last_failed.audit_id} (${when(v.last_failed.created)}): ${v.last_failed.finding ?? v.last_failed.reason ?? 'failed'}`,
      ),
    )
  if (v.held_usdc !== null)
    out.push(h('div', { class: 'muted' }, `${usd(v.held_usdc)} held back from settlement until the operator decides`))
  return out
}

/** What a provider wallet served, earned and was paid, and its offers as routed now. */
function summaryOf(p: ProviderView): HTMLElement[] {
  const stat = (label: string, value: string, id: string) =>
    h(
      'div',
      { class: 'figure', 'data-figure': id },
      h('div', { class: 'label' }, label),
      h('div', { class: 'amount' }, value),
    )
  return [
    h(
      'div',
      { class: 'figures' },
      stat('Requests served', count(p.requests_served), 'served'),
      stat('Earned (after fees)', usd(p.earned_usdc), 'earned'),
      stat('Pending payout', usd(p.pending_usdc), 'pending'),
      stat('Settled', usd(p.settled_usdc), 'settled'),
    ),
    h('h2', {}, 'Offers'),
    p.offers.length === 0
      ? h('p', { class: 'muted' }, 'This wallet has no live offers.')
      : dataTable(
          'offers',
          ['Model', 'Input', 'Output', 'Max concurrency', 'Serving stack', 'Health', 'In flight', 'Verification'],
          h(
            'tbody',
            {},
            p.offers.map((o) =>
              h(
                'tr',
                {},
                h('td', {}, h('code', {}, o.model)),
                h('td', {}, perMtok(o.input_price_per_mtok)),
                h('td', {}, perMtok(o.output_price_per_mtok)),
                h('td', { class: 'num' }, String(o.max_concurrency)),
                h('td', {}, o.fingerprint),
                h('td', {}, h('span', { class: `badge ${o.breaker === 'closed' ? 'good' : 'warn'}` }, o.breaker)),
                h('td', { class: 'num' }, String(o.inflight)),
                h('td', { 'data-verification': o.verification.state }, ...verificationCell(o.verification)),
              ),
            ),
          ),
        ),
    h('h2', {}, 'Payouts'),
    p.payouts.length === 0
      ? h('p', { class: 'muted' }, 'No settlement batch has paid this wallet yet.')
      : dataTable(
          'payouts',
          ['Batch', 'Status', 'Amount', 'Created', 'Settled', 'Transaction'],
          h(
            'tbody',
            {},
            p.payouts.map((b) =>
              h(
                'tr',
                {},
                h('td', {}, h('code', {}, b.batch_id)),
                h('td', {}, b.status),
                h('td', { class: 'num' }, usd(b.amount_usdc)),
                h('td', {}, when(b.created)),
                h('td', {}, when(b.settled)),
                h('td', {}, b.tx_hash ? h('code', {}, b.tx_hash) : '—'),
              ),
            ),
          ),
        ),
  ]
}
