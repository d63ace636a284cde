import { api, type Wallet } from '../api.js'
import { fieldsOf, h, mount, notice } from '../dom.js'
import { usd } from '../format.js'
import type { App } from '../main.js'

/**
 * Balance, approved cap, held and spendable; on the local rail deposit and set the cap, on a chain rail what to
 * approve.
 */
export async function walletPage(app: App, root: HTMLElement): Promise<void> {
  const figures = h('div', { class: 'figures' })
  const status = h('div', { class: 'status', 'aria-live': 'polite' })

  const show = (w: Wallet) =>
    mount(
      figures,
      figure('Balance', w.balance, 'balance', 'Deposited USDC minus what requests cost.'),
      figure(
        'Approved spending cap',
        w.cap,
        'cap',
        'What requests may still spend; each charge lowers it, like an ERC-20 allowance.',
      ),
      figure('Held now', w.held, 'held', 'Reserved for requests in flight: their maximum cost until they finish.'),
      figure(
        'Spendable',
        w.spendable,
        'spendable',
        'min(balance, cap) − held: what the next request can be admitted against.',
      ),
      w.debt !== '0.000000'
        ? figure(
            'Owed',
            w.debt,
            'debt',
            'Charges settlement could not collect; new requests are refused until covered.',
          )
        : null,
      w.chain?.onchain_balance != null
        ? figure(
            'USDC in the wallet',
            w.chain.onchain_balance,
            'onchain-balance',
            `On chain ${w.chain.chain_id}, read at block ${w.chain.read_at_block ?? '?'}.`,
          )
        : null,
      w.chain?.allowance != null
        ? figure(
            'Allowance to the settler',
            w.chain.allowance,
            'allowance',
            `What ${w.chain.approve} may move from the wallet.`,
          )
        : null,
      w.chain
        ? figure(
            'Awaiting settlement',
            w.chain.owed,
            'owed',
            'Captured charges not yet settled on chain; balance and cap above already count them.',
          )
        : null,
    )

  const amountForm = (label: string, action: string, path: string, done: string) => {
    const form: HTMLFormElement = h(
      'form',
      {
        class: 'row',
        'data-action': action,
        onsubmit: async (ev: Event) => {
          ev.preventDefault()
          const amount = (fieldsOf(form).amount ?? '').trim()
          try {
            show(await api<Wallet>('POST', path, { amount }))
            form.reset()
            mount(status, notice('ok', `${done} ${amount} USDC.`))
          } catch (err) {
            app.fail(err, status)
          }
        },
      },
      h(
        'label',
        {},
        `${label} `,
        h('input', {
          name: 'amount',
          inputmode: 'decimal',
          required: true,
          pattern: '\\d+(\\.\\d{1,6})?',
          placeholder: '10.00',
          autocomplete: 'off',
        }),
        ' USDC',
      ),
      h('button', { class: 'primary', type: 'submit' }, label),
    )
    return form
  }

  const rail = app.config.rail
  const actions =
    rail.kind === 'local'
      ? h(
          'section',
          { class: 'card' },
          h('h2', {}, 'Local rail ', h('span', { class: 'badge' }, 'test USDC')),
          h('p', {}, 'Settlement happens in the ledger only. Add test USDC and set how much requests may spend.'),
          amountForm('Deposit', 'deposit', '/wallet/deposit', 'Deposited'),
          amountForm('Set cap', 'cap', '/wallet/cap', 'Approved spending cap set to'),
        )
      : h(
          'section',
          { class: 'card' },
          h('h2', {}, `Chain rail (chain ${rail.chain_id})`),
          h(
            'p',
            {},
            'Deposits and the spending cap live on chain. To let requests spend, approve USDC from this wallet:',
          ),
          h(
            'dl',
            { class: 'kv' },
            h('dt', {}, 'Token (USDC)'),
            h('dd', {}, h('code', {}, rail.usdc)),
            h('dt', {}, 'Spender (approve this address)'),
            h('dd', {}, h('code', {}, rail.spender)),
            h('dt', {}, 'Chain id'),
            h('dd', {}, String(rail.chain_id)),
          ),
          h(
            'p',
            { class: 'muted' },
            'Call approve(spender, amount) on the token from your wallet; the cap shown above mirrors that allowance.',
          ),
        )

  show(await api<Wallet>('GET', '/wallet'))
  mount(root, h('p', { class: 'lead' }, 'Wallet ', h('code', {}, app.session.address)), figures, actions, status)
}

function figure(label: string, amount: string, id: string, hint: string): HTMLElement {
  return h(
    'div',
    { class: 'figure', 'data-figure': id, title: hint },
    h('div', { class: 'label' }, label),
    h('div', { class: 'amount' }, usd(amount)),
    h('div', { class: 'hint' }, hint),
  )
}
