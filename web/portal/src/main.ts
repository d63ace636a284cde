import './style.css'
import { api, ApiError, describe, setCsrf, type PortalConfig, type Session } from './api.js'
import { h, mount, notice } from './dom.js'
import { shortAddress } from './format.js'
import { signInPage } from './pages/signin.js'
import { keysPage } from './pages/keys.js'
import { walletPage } from './pages/wallet.js'
import { usagePage } from './pages/usage.js'
import { providerPage } from './pages/provider.js'

/** What every page gets: the portal's config, the session, and a way back to the sign-in page. */
export interface App {
  config: PortalConfig
  session: Session
  signOut(): Promise<void>
  /** An action of the page failed: back to sign-in when the session is gone, else the error shown in `where`. */
  fail(err: unknown, where: HTMLElement): void
}

type Page = (app: App, root: HTMLElement) => Promise<void>

const PAGES: Record<string, { title: string; render: Page }> = {
  keys: { title: 'API keys', render: keysPage },
  wallet: { title: 'Wallet', render: walletPage },
  usage: { title: 'Usage', render: usagePage },
  provider: { title: 'Provider', render: providerPage },
}

const root = document.getElementById('app')!

async function boot(): Promise<void> {
  const config = await api<PortalConfig>('GET', '/config')
  const session = await api<Session>('GET', '/session').catch(() => null)
  if (session) return shell(config, session)
  mount(
    root,
    signInPage(config, (s) => shell(config, s)),
  )
}

/** The signed-in layout: header with navigation and the wallet, and the page named by the URL's hash. */
function shell(config: PortalConfig, session: Session): void {
  setCsrf(session.csrf_token)
  const app: App = {
    config,
    session,
    async signOut() {
      await api('DELETE', '/session').catch(() => {})
      setCsrf(null)
      window.removeEventListener('hashchange', route)
      history.replaceState(null, '', location.pathname)
      mount(
        root,
        signInPage(config, (s) => shell(config, s)),
      )
    },
    fail(err, where) {
      // The session expired or was ended elsewhere: back to sign-in rather than an error on every action.
      if (err instanceof ApiError && err.body.code === 'session_required') void app.signOut()
      else mount(where, notice('error', describe(err)))
    },
  }
  const visible = Object.entries(PAGES)
  const nav = h(
    'nav',
    { 'aria-label': 'Portal sections' },
    visible.map(([id, p]) => h('a', { href: `#/${id}`, 'data-page': id }, p.title)),
  )
  const main = h('main', { id: 'page' })
  const header = h(
    'header',
    { class: 'top' },
    h('a', { class: 'brand', href: '#/keys' }, 'svc', h('span', {}, ' account portal')),
    nav,
    h(
      'div',
      { class: 'who' },
      h('span', { class: 'address', title: session.address }, shortAddress(session.address)),
      session.provider ? h('span', { class: 'badge' }, 'provider') : null,
      session.status !== 'active' ? h('span', { class: 'badge warn' }, session.status) : null,
      h('button', { class: 'link', onclick: () => void app.signOut() }, 'Sign out'),
    ),
  )
  mount(root, header, main)

  let current = 0
  async function route(): Promise<void> {
    const id = location.hash.replace(/^#\/?/, '') || 'keys'
    const page = visible.find(([k]) => k === id)?.[1] ?? PAGES.keys!
    for (const a of nav.querySelectorAll('a')) {
      a.classList.toggle('active', a.dataset.page === id)
      if (a.dataset.page === id) a.setAttribute('aria-current', 'page')
      else a.removeAttribute('aria-current')
    }
    document.title = `${page.title} · svc portal`
    const mine = ++current
    mount(main, h('h1', {}, page.title), h('p', { class: 'loading' }, 'Loading…'))
    const body = h('div', { class: 'page-body' })
    try {
      await page.render(app, body)
      // A slow page must not overwrite the one the user navigated to since.
      if (mine === current) mount(main, h('h1', {}, page.title), body)
    } catch (err) {
      if (mine !== current) return
      // The session expired or was ended elsewhere: back to sign-in rather than an error on every page.
      if (err instanceof ApiError && err.body.code === 'session_required') return app.signOut()
      mount(main, h('h1', {}, page.title), notice('error', describe(err)))
    }
  }
  window.addEventListener('hashchange', route)
  void route()
}

boot().catch((err) => mount(root, notice('error', `The portal could not start: ${describe(err)}`)))
