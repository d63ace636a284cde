import { api, type EndpointOfferView, type EndpointView } from '../api.js'
import { dataTable, fieldsOf, h, mount, notice } from '../dom.js'
import type { App } from '../main.js'

/**
 * A provider's endpoints and offers: register an endpoint, offer a model on it (live once it passes its probe), pause,
 * resume or withdraw an offer, withdraw an endpoint. Gateways route to a change within seconds.
 */
export async function endpointsSection(app: App, onChange: () => Promise<void>): Promise<HTMLElement> {
  const status = h('div', { class: 'status', 'aria-live': 'polite' })
  const list = h('div', { class: 'table-slot' })
  const offerSlot = h('div', {})
  const models = ((await (await fetch('/v1/models')).json()) as { data: { id: string }[] }).data
    .map((m) => m.id)
    .filter((id) => id !== 'svc/cortex@1')

  const act = async (what: string, run: () => Promise<unknown>) => {
    try {
      await run()
      mount(status, notice('ok', what))
      await refresh()
      await onChange()
    } catch (err) {
      app.fail(err, status)
    }
  }

  async function refresh(): Promise<void> {
    const endpoints = (await api<{ data: EndpointView[] }>('GET', '/provider/endpoints')).data
    mount(list, endpointTable(endpoints))
    mount(offerSlot, offerForm(endpoints.filter((e) => e.status === 'live')))
  }

  const offerButton = (e: EndpointView, o: EndpointOfferView, action: 'pause' | 'resume' | 'withdraw') =>
    h(
      'button',
      {
        'aria-label': `${action} ${o.model} on ${e.id}`,
        onclick: () =>
          act(`${o.model} on ${e.id}: ${action} done.`, () =>
            api('POST', `/provider/endpoints/${e.id}/offers/${action}`, { model: o.model }),
          ),
      },
      action[0]!.toUpperCase() + action.slice(1),
    )

  function endpointTable(endpoints: EndpointView[]): HTMLElement {
    if (endpoints.length === 0) return h('p', { class: 'muted' }, 'No endpoints yet. Register one below.')
    const rows = endpoints.flatMap((e) => [
      h(
        'tr',
        { 'data-endpoint-id': e.id, class: e.status === 'withdrawn' ? 'revoked' : '' },
        h('td', {}, h('code', {}, e.id)),
        h('td', {}, e.base_url),
        h('td', {}, `${e.bundle}:${e.profile}`),
        h('td', {}, h('span', { class: 'badge' }, e.status)),
        h(
          'td',
          { class: 'actions' },
          e.status === 'live'
            ? h(
                'button',
                {
                  class: 'danger',
                  'aria-label': `Withdraw endpoint ${e.id}`,
                  onclick: () =>
                    act(`Withdrew ${e.id}.`, () => api('DELETE', `/provider/endpoints/${encodeURIComponent(e.id)}`)),
                },
                'Withdraw',
              )
            : null,
        ),
      ),
      ...e.offers.map((o) =>
        h(
          'tr',
          { class: 'offer', 'data-offer': `${e.id} ${o.model}` },
          h('td', {}),
          h('td', {}, h('code', {}, o.model), ` as ${o.upstream_model}`),
          h('td', {}, `$${o.input_price_per_mtok} in · $${o.output_price_per_mtok} out / Mtok · ${o.max_concurrency}`),
          h('td', {}, h('span', { class: `badge ${o.status === 'live' ? 'good' : 'warn'}` }, o.status)),
          h(
            'td',
            { class: 'actions' },
            e.status === 'live' && o.status === 'live' ? offerButton(e, o, 'pause') : null,
            e.status === 'live' && o.status === 'paused' ? offerButton(e, o, 'resume') : null,
            e.status === 'live' && o.status !== 'withdrawn' ? offerButton(e, o, 'withdraw') : null,
          ),
        ),
      ),
    ])
    return dataTable(
      'endpoints',
      ['Endpoint', 'Base URL / offer', 'Stack / prices', 'Status', ''],
      h('tbody', {}, rows),
    )
  }

  function offerForm(live: EndpointView[]): HTMLElement {
    if (live.length === 0) return h('p', { class: 'muted' }, 'Register an endpoint to offer models on it.')
    const form: HTMLFormElement = h(
      'form',
      {
        class: 'row create',
        onsubmit: (ev: Event) => {
          ev.preventDefault()
          const f = fieldsOf(form)
          const body = {
            model: f.model,
            upstream_model: f.upstream_model || undefined,
            input_price_per_mtok: f.input_price_per_mtok,
            output_price_per_mtok: f.output_price_per_mtok,
            max_concurrency: Number(f.max_concurrency),
          }
          void act(`${f.model} is live on ${f.endpoint_id}.`, () =>
            api('POST', `/provider/endpoints/${encodeURIComponent(f.endpoint_id ?? '')}/offers`, body),
          )
        },
      },
      h(
        'label',
        {},
        'Endpoint ',
        h(
          'select',
          { name: 'endpoint_id' },
          live.map((e) => h('option', { value: e.id }, e.id)),
        ),
      ),
      h(
        'label',
        {},
        'Model ',
        h(
          'select',
          { name: 'model' },
          models.map((m) => h('option', { value: m }, m)),
        ),
      ),
      h(
        'label',
        {},
        'Upstream model ',
        h('input', { name: 'upstream_model', placeholder: 'as the endpoint names it' }),
      ),
      h(
        'label',
        {},
        'Input USDC/Mtok ',
        h('input', { name: 'input_price_per_mtok', required: true, inputmode: 'decimal' }),
      ),
      h(
        'label',
        {},
        'Output USDC/Mtok ',
        h('input', { name: 'output_price_per_mtok', required: true, inputmode: 'decimal' }),
      ),
      h('label', {}, 'Max concurrency ', h('input', { name: 'max_concurrency', type: 'number', min: 1, value: 64 })),
      h('button', { class: 'primary', type: 'submit' }, 'Offer model'),
    )
    return form
  }

  const register: HTMLFormElement = h(
    'form',
    {
      class: 'row create',
      onsubmit: (ev: Event) => {
        ev.preventDefault()
        const f = fieldsOf(register)
        const body = { base_url: f.base_url, api_key: f.api_key || undefined, bundle: f.bundle, profile: f.profile }
        void act(`Registered ${f.base_url}.`, async () => {
          await api('POST', '/provider/endpoints', body)
          register.reset()
        })
      },
    },
    h('label', {}, 'Base URL ', h('input', { name: 'base_url', required: true, placeholder: 'https://…/v1' })),
    h('label', {}, 'API key ', h('input', { name: 'api_key', type: 'password', autocomplete: 'off' })),
    h('label', {}, 'Bundle ', h('input', { name: 'bundle', required: true, placeholder: 'vllm-0.6' })),
    h('label', {}, 'Profile ', h('input', { name: 'profile', required: true, placeholder: 'h100-fp8' })),
    h('button', { class: 'primary', type: 'submit' }, 'Register endpoint'),
  )

  await refresh()
  return h(
    'section',
    { 'aria-label': 'Endpoints' },
    h('h2', {}, 'Endpoints'),
    h(
      'p',
      { class: 'muted' },
      'Each offer goes live once its endpoint answers, streams and (for models with tools) calls tools.',
    ),
    list,
    h('h3', {}, 'Offer a model'),
    offerSlot,
    h('h3', {}, 'Register an endpoint'),
    register,
    status,
  )
}
