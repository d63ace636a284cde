import { describe, type PortalConfig, type Session } from '../api.js'
import { h, mount, notice } from '../dom.js'
import {
  forgetTestWallet,
  hasTestWallet,
  injectedSigner,
  injectedWallet,
  signIn,
  testSigner,
  type Signer,
} from '../wallet.js'

/** Sign-in: a browser wallet, or on the local rail a test wallet kept in this browser. */
export function signInPage(config: PortalConfig, done: (s: Session) => void): HTMLElement {
  const status = h('div', { class: 'status', 'aria-live': 'polite' })
  const buttons: HTMLButtonElement[] = []

  const attempt = (getSigner: () => Promise<Signer>) => async () => {
    for (const b of buttons) b.disabled = true
    mount(status, h('p', { class: 'loading' }, 'Waiting for the wallet to sign…'))
    try {
      const session = await signIn(await getSigner())
      done(session)
    } catch (err) {
      mount(status, notice('error', `Sign-in failed: ${describe(err)}`))
      for (const b of buttons) b.disabled = false
    }
  }

  const injected = injectedWallet()
  const connect = h(
    'button',
    { class: 'primary', onclick: attempt(injectedSigner), disabled: !injected },
    'Sign in with browser wallet',
  )
  buttons.push(connect)

  let local: HTMLElement | null = null
  if (config.local_test_wallet) {
    const use = h(
      'button',
      { onclick: attempt(testSigner) },
      hasTestWallet() ? 'Use my local test wallet' : 'Use a local test wallet',
    )
    buttons.push(use)
    const forget = hasTestWallet()
      ? h(
          'button',
          {
            class: 'link',
            onclick: () => {
              forgetTestWallet()
              location.reload()
            },
          },
          'Forget the test wallet kept in this browser',
        )
      : null
    local = h(
      'section',
      { class: 'card test-wallet' },
      h('h2', {}, 'Local test wallet ', h('span', { class: 'badge warn' }, 'test only')),
      h(
        'p',
        {},
        "A key generated in this browser and kept in its local storage. It is for the local rail's test USDC only: ",
        h('strong', {}, 'never send real funds to it'),
        ', and anyone with access to this browser profile can use it.',
      ),
      h('div', { class: 'row' }, use, forget),
    )
  }

  return h(
    'div',
    { class: 'signin' },
    h('h1', {}, 'Sign in to the svc portal'),
    h(
      'p',
      { class: 'lead' },
      'Sign in with your wallet (Sign-In with Ethereum). The wallet signs a one-time message naming this site; ' +
        'nothing is sent on chain and no fee is paid. Your account is your wallet address.',
    ),
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Browser wallet'),
      injected
        ? h('p', {}, 'A wallet extension is available in this browser.')
        : h('p', { class: 'muted' }, 'No wallet extension was found in this browser.'),
      connect,
    ),
    local,
    status,
    h('p', { class: 'muted small' }, `Rail: ${config.rail.kind} · chain id ${config.chain_id}`),
  )
}
