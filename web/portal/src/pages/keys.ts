import { api, type ApiKey, type NewKey } from '../api.js'
import { dataTable, fieldsOf, h, mount, notice } from '../dom.js'
import { when } from '../format.js'
import type { App } from '../main.js'

/** API keys: create one (shown once, with a copy button), list them, revoke with confirmation. */
export async function keysPage(app: App, root: HTMLElement): Promise<void> {
  const reveal = h('div', { class: 'reveal-slot' })
  const status = h('div', { class: 'status', 'aria-live': 'polite' })
  const table = h('div', { class: 'table-slot' })

  async function refresh(): Promise<void> {
    const keys = await api<{ data: ApiKey[] }>('GET', '/keys')
    mount(table, keyTable(keys.data))
  }

  function keyTable(keys: ApiKey[]): HTMLElement {
    if (keys.length === 0) return h('p', { class: 'muted' }, 'No keys yet. Create one above.')
    return dataTable(
      'keys',
      ['Prefix', 'Name', 'Limits', 'Created', 'Last used', ''],
      h(
        'tbody',
        {},
        keys.map((k) =>
          h(
            'tr',
            { 'data-key-id': k.id, class: k.revoked ? 'revoked' : '' },
            h('td', {}, h('code', {}, k.prefix)),
            h('td', {}, k.name),
            h('td', { class: 'limits' }, limitsText(k)),
            h('td', {}, when(k.created)),
            h('td', {}, when(k.last_used)),
            h(
              'td',
              { class: 'actions' },
              k.revoked
                ? h('span', { class: 'badge' }, `revoked ${when(k.revoked)}`)
                : [
                    h(
                      'button',
                      { 'aria-label': `Limits of ${k.name} (${k.prefix})`, onclick: () => editLimits(k) },
                      'Limits',
                    ),
                    h(
                      'button',
                      {
                        class: 'danger',
                        'aria-label': `Revoke ${k.name} (${k.prefix})`,
                        onclick: () => confirmRevoke(k),
                      },
                      'Revoke',
                    ),
                  ],
            ),
          ),
        ),
      ),
    )
  }

  function editLimits(k: ApiKey): void {
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: 'limits-title' }, `Limits of “${k.name}”`),
      h('p', { class: 'muted' }, 'Across every gateway. Leave a field empty for no limit.'),
      limitField('rpm', 'Requests a minute', k.rpm),
      limitField('tpm', 'Tokens a minute', k.tpm),
      spendFields(k),
      h(
        'div',
        { class: 'row' },
        h('button', { value: 'cancel', formnovalidate: true }, 'Cancel'),
        h('button', { value: 'save', class: 'primary' }, 'Save limits'),
      ),
    )
    const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'limits-title' }, form)
    dialog.addEventListener('close', async () => {
      dialog.remove()
      if (dialog.returnValue !== 'save') return
      try {
        await api('PATCH', `/keys/${encodeURIComponent(k.id)}`, limitsFrom(fieldsOf(form)))
        mount(status, notice('ok', `Limits of ${k.prefix} (${k.name}) saved.`))
        await refresh()
      } catch (err) {
        app.fail(err, status)
      }
    })
    document.body.appendChild(dialog)
    dialog.showModal()
  }

  function confirmRevoke(k: ApiKey): void {
    const dialog = h(
      'dialog',
      { class: 'confirm', 'aria-labelledby': 'revoke-title' },
      h('h2', { id: 'revoke-title' }, `Revoke “${k.name}”?`),
      h(
        'p',
        {},
        'Requests with ',
        h('code', {}, k.prefix),
        ' will be refused within seconds (401 invalid_api_key). This cannot be undone.',
      ),
      h(
        'form',
        { method: 'dialog', class: 'row' },
        h('button', { value: 'cancel' }, 'Cancel'),
        h('button', { value: 'revoke', class: 'danger' }, 'Revoke key'),
      ),
    )
    dialog.addEventListener('close', async () => {
      dialog.remove()
      if (dialog.returnValue !== 'revoke') return
      try {
        await api('DELETE', `/keys/${encodeURIComponent(k.id)}`)
        mount(status, notice('ok', `Revoked ${k.prefix} (${k.name}).`))
        await refresh()
      } catch (err) {
        app.fail(err, status)
      }
    })
    document.body.appendChild(dialog)
    dialog.showModal()
  }

  function showOnce(k: NewKey): void {
    const copied = h('span', { class: 'copied', 'aria-live': 'polite' })
    const field = h('input', {
      class: 'secret',
      readonly: true,
      value: k.api_key,
      'aria-label': 'New API key',
      spellcheck: 'false',
    })
    const copy = h(
      'button',
      {
        class: 'primary',
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(k.api_key)
            copied.textContent = 'Copied.'
          } catch {
            field.select()
            copied.textContent = 'Select the key and copy it (Ctrl/Cmd-C).'
          }
        },
      },
      'Copy',
    )
    mount(
      reveal,
      h(
        'section',
        { class: 'card reveal', role: 'region', 'aria-label': 'New key' },
        h('h2', {}, `Your new key “${k.name}”`),
        h('div', { class: 'row' }, field, copy, copied),
        h(
          'p',
          { class: 'warning' },
          h('strong', {}, 'Copy it now: you will not see it again. '),
          'Only a hash is stored; if you lose it, revoke it and create another.',
        ),
        h('button', { class: 'link', onclick: () => mount(reveal) }, 'I have stored it, hide it'),
      ),
    )
  }

  const form = h(
    'form',
    {
      class: 'row create',
      onsubmit: async (ev: Event) => {
        ev.preventDefault()
        const name = fieldsOf(form).name ?? ''
        try {
          const k = await api<NewKey>('POST', '/keys', { name })
          form.reset()
          mount(status)
          showOnce(k)
          await refresh()
        } catch (err) {
          app.fail(err, status)
        }
      },
    },
    h(
      'label',
      {},
      'Name ',
      h('input', { name: 'name', required: true, maxlength: 128, placeholder: 'e.g. laptop, ci', autocomplete: 'off' }),
    ),
    h('button', { class: 'primary', type: 'submit' }, 'Create key'),
  )

  await refresh()
  mount(
    root,
    h(
      'p',
      { class: 'lead' },
      'Keys authenticate requests to ',
      h('code', {}, '/v1'),
      ' (',
      h('code', {}, 'Authorization: Bearer svc_test_…'),
      "). Every key spends from this wallet's balance within its approved cap.",
    ),
    form,
    reveal,
    status,
    table,
  )
}

const RESETS = { none: 'in all', daily: 'a day', weekly: 'a week', monthly: 'a month' } as const

function limitsText(k: ApiKey): string {
  const rates = [k.rpm !== null ? `${k.rpm} requests` : '', k.tpm !== null ? `${k.tpm} tokens` : '']
    .filter(Boolean)
    .join(', ')
  const spend =
    k.spend_limit !== null && k.this_period
      ? `${k.spend_limit} USDC ${RESETS[k.limit_reset ?? 'none']} (${k.this_period.spent_usdc} spent` +
        (k.this_period.resets_at === null ? ')' : `, resets ${when(k.this_period.resets_at)})`)
      : ''
  const parts = [rates && `${rates} a minute`, spend].filter(Boolean)
  return parts.length ? parts.join('; ') : 'none'
}

function limitField(name: 'rpm' | 'tpm', label: string, value: number | null): HTMLElement {
  const input = h('input', { name, type: 'number', min: 1, step: 1, value: value ?? '', placeholder: 'no limit' })
  return h('label', {}, `${label} `, input)
}

/** The spend limit (USDC) and when it starts over (UTC). */
function spendFields(k: ApiKey): HTMLElement[] {
  const limit = h('input', {
    name: 'spend_limit',
    inputmode: 'decimal',
    pattern: '\\d+(\\.\\d{1,6})?',
    value: k.spend_limit ?? '',
    placeholder: 'no limit',
  })
  const reset = h(
    'select',
    { name: 'limit_reset' },
    (['none', 'daily', 'weekly', 'monthly'] as const).map((r) =>
      h('option', { value: r, selected: r === (k.limit_reset ?? 'none') }, `resets ${r}`),
    ),
  )
  return [h('label', {}, 'Spend limit (USDC) ', limit), h('label', {}, 'Spend limit period (UTC) ', reset)]
}

/** The form's limits: an empty field is no limit. */
function limitsFrom(fields: Record<string, string>) {
  const of = (v: string | undefined) => (v === undefined || v.trim() === '' ? null : Number(v))
  const spend = fields.spend_limit?.trim() ? fields.spend_limit.trim() : null
  return {
    rpm: of(fields.rpm),
    tpm: of(fields.tpm),
    spend_limit: spend,
    ...(spend === null ? {} : { limit_reset: fields.limit_reset ?? 'none' }),
  }
}
