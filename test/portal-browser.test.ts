import { readFile } from 'node:fs/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { chat, startMarket, type Market } from './helpers/market.js'
import {
  hasChromium,
  injectWallet,
  launchChromium,
  openPortalPage,
  portalWebRoot,
  screenshotPath,
  signInAt,
} from './helpers/browser.js'
import { signIn } from './helpers/portal.js'
import { SimulatedProvider } from '../src/providers/simulated/server.js'

/** The portal in Chromium: a wallet signs in, makes and uses a key, sees its money and usage; accounts stay apart. */
describe.skipIf(!hasChromium)('portal in Chromium', () => {
  let m: Market
  let browser: Browser
  const provider = privateKeyToAccount(generatePrivateKey())
  const CHAIN = 31337

  beforeAll(async () => {
    const webRoot = await portalWebRoot()
    m = await startMarket({
      portal: { webRoot },
      edit: (config) => void (config.providers[0]!.address = provider.address),
    })
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
    await m?.close()
  })

  const open = () => openPortalPage(browser, m.url)

  const signInWithWallet = (page: Page) => signInAt(page, m.url)

  const figure = (page: Page, id: string) => page.locator(`[data-figure="${id}"] .amount`).textContent()

  it("signs in with a wallet, funds it, creates and copies a key that works, shows the request's cost, and revokes the key", async () => {
    const alice = privateKeyToAccount(generatePrivateKey())
    const { context, page, errors } = await open()
    try {
      const wallet = await injectWallet(context, alice, CHAIN)
      await page.goto(`${m.url}/portal`)
      await page.getByRole('heading', { name: 'Sign in to the svc portal' }).waitFor()
      await page.screenshot({ path: screenshotPath('portal-1-sign-in'), fullPage: true })
      await page.getByRole('button', { name: 'Sign in with browser wallet' }).click()
      await page.getByRole('heading', { name: 'API keys' }).waitFor()
      expect(wallet.signed).toHaveLength(1)
      expect(wallet.signed[0]).toContain(
        `${new URL(m.url).host} wants you to sign in with your Ethereum account:\n${alice.address}`,
      )
      expect(wallet.signed[0]).toContain(`URI: ${m.url}/portal`)
      expect(wallet.signed[0]).toContain(`Chain ID: ${CHAIN}`)
      expect(await page.locator('.who .address').getAttribute('title')).toBe(alice.address)
      // The session cookie is HttpOnly: the page's scripts cannot read it.
      expect(await page.evaluate(() => document.cookie)).toBe('')

      // Wallet: deposit and approve a cap on the local rail.
      await page.getByRole('link', { name: 'Wallet' }).click()
      await page.locator('form[data-action="deposit"] input').fill('5')
      await page.getByRole('button', { name: 'Deposit' }).click()
      await page.getByText('Deposited 5 USDC.').waitFor()
      await page.locator('form[data-action="cap"] input').fill('2.5')
      await page.getByRole('button', { name: 'Set cap' }).click()
      await page.getByText('Approved spending cap set to 2.5 USDC.').waitFor()
      expect(await figure(page, 'balance')).toBe('$5.000000')
      expect(await figure(page, 'cap')).toBe('$2.500000')
      expect(await figure(page, 'held')).toBe('$0.000000')
      expect(await figure(page, 'spendable')).toBe('$2.500000')
      await page.screenshot({ path: screenshotPath('portal-3-wallet'), fullPage: true })

      // Keys: create one, see it once, copy it.
      await page.getByRole('link', { name: 'API keys' }).click()
      await page.getByLabel('Name').fill('browser test')
      await page.getByRole('button', { name: 'Create key' }).click()
      const secret = page.getByLabel('New API key')
      await secret.waitFor()
      const shown = await secret.inputValue()
      expect(shown).toMatch(/^svc_test_[0-9A-Za-z]{40}$/)
      await page.getByText('you will not see it again').waitFor()
      await page.getByRole('button', { name: 'Copy' }).click()
      await page.getByText('Copied.').waitFor()
      const key = await page.evaluate(() => navigator.clipboard.readText())
      expect(key).toBe(shown)
      const row = page.locator('tr', { hasText: 'browser test' })
      expect(await row.locator('code').textContent()).toBe(`${key.slice(0, 15)}…`)
      await page.screenshot({ path: screenshotPath('portal-2-keys-new'), fullPage: true })
      // Shown once: after a reload the secret is nowhere on the page.
      await page.reload()
      await page.locator('tr', { hasText: 'browser test' }).waitFor()
      expect(await page.content()).not.toContain(key)

      // The copied key works against the API.
      const res = await chat(m.url, key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'Hello from the browser test' }],
        max_tokens: 16,
      })
      expect(res.status).toBe(200)
      const reply = await res.json()

      // Usage: the request, with its cost, newest first; totals; the chart.
      await page.getByRole('link', { name: 'Usage' }).click()
      const usageRow = page.locator(`tr[data-request-id="${reply.svc.request_id}"]`)
      await usageRow.waitFor()
      expect(await usageRow.locator('td.cost').textContent()).toBe(`$${reply.svc.cost_usdc}`)
      expect(await usageRow.textContent()).toContain('svc/atlas@1')
      expect(await usageRow.textContent()).toContain('completed')
      // Its receipt downloads as a file of the signed receipt.
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        usageRow.getByRole('link', { name: 'Receipt' }).click(),
      ])
      expect(download.suggestedFilename()).toBe(`${reply.svc.receipt_id}.json`)
      const saved = JSON.parse(await readFile(await download.path(), 'utf8'))
      expect(saved.receipt).toMatchObject({ receipt_id: reply.svc.receipt_id, cost: expect.any(String) })
      expect(saved.signature).toMatch(/^0x[0-9a-f]{130}$/)
      expect(await figure(page, 'cost')).toBe(`$${reply.svc.cost_usdc}`)
      expect(await figure(page, 'requests')).toBe('1')
      expect(await page.locator('svg.chart rect.bar').count()).toBe(14)
      await page.screenshot({ path: screenshotPath('portal-4-usage'), fullPage: true })

      // Limits: a daily spend limit below what the key spent today refuses its next request with 402.
      await page.getByRole('link', { name: 'API keys' }).click()
      await page
        .locator('tr', { hasText: 'browser test' })
        .getByRole('button', { name: /^Limits of/ })
        .click()
      await page.getByLabel('Spend limit (USDC)').fill('0.000001')
      await page.getByLabel('Spend limit period (UTC)').selectOption('daily')
      await page.getByRole('button', { name: 'Save limits' }).click()
      const limits = page.locator('tr', { hasText: 'browser test' }).locator('td.limits')
      await limits.filter({ hasText: '0.000001 USDC a day' }).waitFor()
      expect(await limits.textContent()).toContain(`${reply.svc.cost_usdc} spent`)
      const over = await chat(m.url, key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'more' }] })
      expect(over.status).toBe(402)
      expect((await over.json()).error.message).toMatch(/spend limit of 0.000001 USDC a day/)

      // Revoke, with confirmation; the key is refused at once.
      await page.getByRole('link', { name: 'API keys' }).click()
      await page.locator('tr', { hasText: 'browser test' }).getByRole('button', { name: 'Revoke' }).click()
      await page.getByRole('heading', { name: 'Revoke “browser test”?' }).waitFor()
      await page.screenshot({ path: screenshotPath('portal-5-revoke-confirm') })
      await page.getByRole('button', { name: 'Revoke key' }).click()
      await page.locator('tr.revoked', { hasText: 'browser test' }).waitFor()
      const refused = await chat(m.url, key, {
        model: 'svc/atlas@1',
        messages: [{ role: 'user', content: 'again' }],
        max_tokens: 16,
      })
      expect(refused.status).toBe(401)
      expect((await refused.json()).error.code).toBe('invalid_api_key')

      // Sign out: back to the sign-in page.
      await page.getByRole('button', { name: 'Sign out' }).click()
      await page.getByRole('heading', { name: 'Sign in to the svc portal' }).waitFor()
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }
  })

  it("a second wallet, a local test wallet, sees none of the first wallet's keys or usage", async () => {
    const first = await signIn(m.url, privateKeyToAccount(generatePrivateKey()))
    const theirs = await (await first.call('POST', '/keys', { name: 'first-wallet-secret-key' })).json()
    const { context, page, errors } = await open()
    try {
      await page.goto(`${m.url}/portal`)
      await page.getByText('test only').waitFor()
      await page.getByRole('button', { name: 'Use a local test wallet' }).click()
      await page.getByRole('heading', { name: 'API keys' }).waitFor()
      const address = await page.locator('.who .address').getAttribute('title')
      expect(address).not.toBe(first.address)
      expect(await page.evaluate(() => localStorage.getItem('svc.portal.testWallet'))).toMatch(/^0x[0-9a-f]{64}$/)
      await page.getByText('No keys yet.').waitFor()
      expect(await page.content()).not.toContain(theirs.prefix)
      await page.getByRole('link', { name: 'Usage' }).click()
      await page.getByText('No requests match.').waitFor()
      expect(await page.locator('select[name="key_id"] option').allTextContents()).toEqual(['All keys'])
      await page.screenshot({ path: screenshotPath('portal-6-second-wallet'), fullPage: true })
      // Its own session cannot reach the first wallet's key either.
      const revoke = await page.evaluate(
        async (id) => (await fetch(`/portal/api/keys/${id}`, { method: 'DELETE' })).status,
        theirs.id,
      )
      expect(revoke).toBe(403) // no CSRF token from a bare fetch
      // Back in a new page the same test wallet signs in again as the same address.
      await page.getByRole('button', { name: 'Sign out' }).click()
      await page.getByRole('button', { name: 'Use my local test wallet' }).click()
      await page.getByRole('heading', { name: 'API keys' }).waitFor()
      expect(await page.locator('.who .address').getAttribute('title')).toBe(address)
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }
  })

  it('keeps the usage table to the filter last chosen, and goes back to sign-in when the session ends under an action', async () => {
    const carol = privateKeyToAccount(generatePrivateKey())
    const api = await signIn(m.url, carol)
    expect((await api.call('POST', '/wallet/deposit', { amount: '5' })).status).toBe(200)
    expect((await api.call('POST', '/wallet/cap', { amount: '5' })).status).toBe(200)
    const key = (await (await api.call('POST', '/keys', { name: 'usage' })).json()).api_key
    for (const [model, n] of [
      ['svc/atlas@1', 3],
      ['svc/tern@2', 2],
    ] as const) {
      for (let i = 0; i < n; i++)
        expect(
          (await chat(m.url, key, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })).status,
        ).toBe(200)
    }
    const { context, page, errors } = await open()
    try {
      await injectWallet(context, carol, CHAIN)
      await signInWithWallet(page)
      await page.getByRole('link', { name: 'Usage' }).click()
      await page.locator('tr[data-request-id]').first().waitFor()
      // The answers for atlas come late: the table and totals must end as tern's, chosen after it.
      let slow = true
      await page.route('**/portal/api/usage**', async (route) => {
        if (slow && route.request().url().includes('model=svc%2Fatlas%401'))
          await new Promise((r) => setTimeout(r, 400))
        await route.continue()
      })
      const select = page.locator('select[name="model"]')
      await select.selectOption('svc/atlas@1')
      await select.selectOption('svc/tern@2')
      await page.waitForTimeout(900)
      slow = false
      expect(await page.locator('tr[data-request-id] td:nth-child(3) code').allTextContents()).toEqual([
        'svc/tern@2',
        'svc/tern@2',
      ])
      expect(await figure(page, 'requests')).toBe('2')
      // The session ends elsewhere; the next action goes back to sign-in instead of failing silently.
      await m.store.db.deleteFrom('portal_sessions').execute()
      await select.selectOption('svc/atlas@1')
      await page.getByRole('button', { name: 'Sign in with browser wallet' }).waitFor()
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }
  })

  it('shows a provider wallet its offers, earnings and payouts', async () => {
    const { context, page, errors } = await open()
    try {
      await injectWallet(context, provider, CHAIN)
      const r = await (
        await chat(m.url, m.key, { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'earn' }], max_tokens: 8 })
      ).json()
      expect(r.svc.provider).toBe(provider.address)
      await m.server.settler.runOnce()
      await signInWithWallet(page)
      await page.getByRole('link', { name: 'Provider' }).click()
      await page.getByRole('heading', { name: 'Offers' }).waitFor()
      expect(await page.locator('table').first().textContent()).toContain('svc/atlas@1')
      // No audit has run in this market: the offer is unverified, with no finding.
      expect(await page.locator('[data-verification]').first().textContent()).toContain('unverified0 passed, 0 failed')
      expect(Number(await figure(page, 'served'))).toBeGreaterThanOrEqual(1)
      expect(await figure(page, 'settled')).not.toBe('$0.000000')
      await page.getByText('settled').first().waitFor()
      await page.screenshot({ path: screenshotPath('portal-7-provider'), fullPage: true })
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }
  })

  it('lets a new wallet register an endpoint, offer a model that then serves requests, pause it and withdraw it', async () => {
    const sim = await SimulatedProvider.start()
    const carol = privateKeyToAccount(generatePrivateKey())
    const { context, page, errors } = await open()
    try {
      await injectWallet(context, carol, CHAIN)
      await signInWithWallet(page)
      await page.getByRole('link', { name: 'Provider' }).click()
      await page.getByText('This wallet serves no model yet').waitFor()
      await page.getByLabel('Base URL').fill(sim.url)
      await page.getByLabel('Bundle').fill('vllm-0.7')
      await page.getByLabel('Profile').fill('sim')
      await page.getByRole('button', { name: 'Register endpoint' }).click()
      await page.locator('tr[data-endpoint-id]').waitFor()
      await page.locator('select[name="model"]').selectOption('svc/atlas@1')
      await page.getByLabel('Upstream model').fill('atlas')
      await page.getByLabel('Input USDC/Mtok').fill('0.01')
      await page.getByLabel('Output USDC/Mtok').fill('0.02')
      await page.getByRole('button', { name: 'Offer model' }).click()
      const offer = page.locator('tr.offer', { hasText: 'svc/atlas@1' })
      await offer.getByText('live').waitFor()
      await page.screenshot({ path: screenshotPath('portal-8-provider-endpoints'), fullPage: true })
      const ask = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'who serves?' }], max_tokens: 8 }
      await expect
        .poll(async () => (await (await chat(m.url, m.key, ask)).json()).svc.provider, { timeout: 5_000 })
        .toBe(carol.address)
      await offer.getByRole('button', { name: /^pause/ }).click()
      await offer.getByText('paused').waitFor()
      await expect
        .poll(async () => (await (await chat(m.url, m.key, ask)).json()).svc.provider, { timeout: 5_000 })
        .not.toBe(carol.address)
      await page.getByRole('button', { name: /^Withdraw endpoint/ }).click()
      await page.locator('tr.revoked[data-endpoint-id]').waitFor()
      expect(errors).toEqual([])
    } finally {
      await context.close()
      await sim.close()
    }
  })
})
