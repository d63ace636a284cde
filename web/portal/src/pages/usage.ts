import { api, type ApiKey, type UsagePage, type UsageRecord, type UsageSummary } from '../api.js'
import { dataTable, h, mount } from '../dom.js'
import { spendChart } from '../chart.js'
import { count, shortAddress, stamp, usd } from '../format.js'
import type { App } from '../main.js'

const PAGE = 50

/**
 * Every request, newest first, filtered by key and model; totals and a chart of spend per day. A wallet that paid with
 * x402 chooses between its keys' requests and those it paid for per request.
 */
export async function usagePage(app: App, root: HTMLElement): Promise<void> {
  const [keys, x402, models] = await Promise.all([
    api<{ data: ApiKey[] }>('GET', '/keys'),
    api<{ account: { to_return_usdc: string } | null }>('GET', '/x402'),
    // The public model list names what can be filtered on; it needs no key.
    fetch('/v1/models')
      .then((r) => r.json() as Promise<{ data: { id: string }[] }>)
      .catch(() => ({ data: [] })),
  ])
  const keyName = new Map(keys.data.map((k) => [k.id, k.name]))
  const keySelect = h(
    'select',
    { name: 'key_id', 'aria-label': 'Key' },
    h('option', { value: '' }, 'All keys'),
    keys.data.map((k) => h('option', { value: k.id }, `${k.name} (${k.prefix})`)),
  )
  const modelSelect = h(
    'select',
    { name: 'model', 'aria-label': 'Model' },
    h('option', { value: '' }, 'All models'),
    models.data.map((m) => h('option', { value: m.id }, m.id)),
  )
  const paidWith = h(
    'select',
    { name: 'account', 'aria-label': 'Paid with' },
    h('option', { value: '' }, 'API keys'),
    h('option', { value: 'x402' }, 'x402 payments'),
  )
  const totals = h('div', { class: 'figures' })
  const chart = h('div', { class: 'chart-slot' })
  const rows = h('tbody')
  const more = h('button', { class: 'link', hidden: true }, 'Load more')
  const status = h('div', { class: 'status', 'aria-live': 'polite' })
  let after: string | null = null
  /** Each reload starts a generation: answers to an earlier one (a filter changed since) are dropped. */
  let generation = 0

  const query = (extra: Record<string, string> = {}) => {
    const q = new URLSearchParams(extra)
    if (paidWith.value) q.set('account', paidWith.value)
    if (keySelect.value && !paidWith.value) q.set('key_id', keySelect.value)
    if (modelSelect.value) q.set('model', modelSelect.value)
    return q.toString()
  }

  const row = (u: UsageRecord) =>
    h(
      'tr',
      { 'data-request-id': u.request_id },
      h('td', {}, stamp(u.created)),
      h('td', {}, h('code', {}, u.request_id)),
      h(
        'td',
        {},
        h('code', {}, u.model),
        u.served_model && u.served_model !== u.model ? h('span', { class: 'muted' }, ` → ${u.served_model}`) : null,
      ),
      h(
        'td',
        { title: u.provider ?? '' },
        u.provider ? (u.provider.startsWith('0x') ? shortAddress(u.provider) : u.provider) : '—',
      ),
      h(
        'td',
        { class: 'num', title: `${u.usage.prompt_tokens} in, ${u.usage.completion_tokens} out` },
        `${count(u.usage.prompt_tokens)} / ${count(u.usage.completion_tokens)}`,
      ),
      h('td', { class: 'num cost' }, usd(u.cost_usdc)),
      h(
        'td',
        {},
        h(
          'span',
          { class: `badge ${u.outcome === 'completed' ? 'good' : u.outcome === 'client_closed' ? '' : 'warn'}` },
          u.outcome,
        ),
      ),
      h('td', { class: 'muted small', title: u.key_id }, keyName.get(u.key_id) ?? u.key_id),
      h(
        'td',
        {},
        h(
          'a',
          {
            class: 'receipt',
            href: `/portal/api/usage/${encodeURIComponent(u.request_id)}/receipt${paidWith.value ? '?account=x402' : ''}`,
            download: `${u.request_id.replace(/^req_/, 'rct_')}.json`,
            title: 'The signed receipt, with its settlement proof once settled (svc receipt verify)',
          },
          'Receipt',
        ),
      ),
    )

  /** The next page of the current generation; one at a time ("Load more" is disabled while one loads). */
  async function loadPage(mine = generation): Promise<void> {
    more.disabled = true
    try {
      const page = await api<UsagePage>('GET', `/usage?${query({ limit: String(PAGE), ...(after ? { after } : {}) })}`)
      if (mine !== generation) return
      rows.append(...page.data.map(row))
      if (!after && page.data.length === 0)
        rows.append(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No requests match.')))
      after = page.last_id
      more.hidden = !page.has_more
    } finally {
      if (mine === generation) more.disabled = false
    }
  }

  async function reload(): Promise<void> {
    const mine = ++generation
    after = null
    rows.replaceChildren()
    more.hidden = true
    mount(status)
    const summary = await api<UsageSummary>('GET', `/usage/summary?${query({ days: '14' })}`)
    if (mine !== generation) return
    const t = summary.totals
    mount(
      totals,
      h(
        'div',
        { class: 'figure', 'data-figure': 'requests' },
        h('div', { class: 'label' }, 'Requests'),
        h('div', { class: 'amount' }, count(t.requests)),
      ),
      h(
        'div',
        { class: 'figure', 'data-figure': 'tokens' },
        h('div', { class: 'label' }, 'Tokens in / out'),
        h('div', { class: 'amount' }, `${count(t.prompt_tokens)} / ${count(t.completion_tokens)}`),
      ),
      h(
        'div',
        { class: 'figure', 'data-figure': 'cost' },
        h('div', { class: 'label' }, 'Total cost'),
        h('div', { class: 'amount' }, usd(t.cost_usdc)),
      ),
    )
    mount(chart, spendChart(summary.daily))
    await loadPage(mine)
  }

  const failed = (err: unknown) => app.fail(err, status)
  keySelect.addEventListener('change', () => void reload().catch(failed))
  paidWith.addEventListener('change', () => {
    keySelect.disabled = paidWith.value !== ''
    void reload().catch(failed)
  })
  modelSelect.addEventListener('change', () => void reload().catch(failed))
  more.addEventListener('click', () => void loadPage().catch(failed))
  await reload()
  mount(
    root,
    h(
      'div',
      { class: 'row filters' },
      x402.account ? h('label', {}, 'Paid with ', paidWith) : null,
      h('label', {}, 'Key ', keySelect),
      h('label', {}, 'Model ', modelSelect),
    ),
    totals,
    chart,
    dataTable(
      'usage',
      ['Time', 'Request id', 'Model', 'Provider', 'Tokens', 'Cost', 'Outcome', 'Key', 'Receipt'],
      rows,
    ),
    more,
    status,
  )
}
