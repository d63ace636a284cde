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

/** The portal's pages at a desktop's and a phone's width: every table fits, its last column reachable. */
describe.skipIf(!hasChromium)('portal layout in Chromium', () => {
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

  /** Whether the page and each of its tables fit the window: nothing wider than it, no cell past its right edge. */
  const fitting = (page: Page) =>
    page.evaluate(() => {
      const width = document.documentElement.clientWidth
      const inside = (el: Element) => el.getBoundingClientRect().right <= width + 0.5
      // A table's frame: the element it scrolls in, or the table itself.
      const frames = [...document.querySelectorAll('table')].map((t) => t.closest('.table-wrap') ?? t)
      // What reaches past the window's right edge, named (none when the page fits).
      const wide = [...document.querySelectorAll('body *')]
        .filter((e) => !inside(e))
        .map((e) => `${e.tagName.toLowerCase()}.${e.className}`)
      return {
        page: document.documentElement.scrollWidth <= width ? 'fits' : wide.slice(0, 5).join(', '),
        tables: frames.length,
        frames: frames.every((f) => inside(f) && f.scrollWidth <= f.clientWidth + 1),
        cells: [...document.querySelectorAll('td')].every(inside),
      }
    })

  it('fits the usage, keys and provider tables to a 1280 and a 390 pixel wide window', async () => {
    const dave = privateKeyToAccount(generatePrivateKey())
    const api = await signIn(m.url, dave)
    expect((await api.call('POST', '/wallet/deposit', { amount: '5' })).status).toBe(200)
    expect((await api.call('POST', '/wallet/cap', { amount: '5' })).status).toBe(200)
    // The widest a key's name may be, and requests of every model.
    const name = 'integration for the nightly batch of the accounting team, v2'.padEnd(64, '!')
    const key = (await (await api.call('POST', '/keys', { name })).json()).api_key
    for (const model of ['svc/atlas@1', 'svc/tern@2', 'svc/wren@1', 'svc/quill@1', 'svc/cortex@1'])
      expect(
        (await chat(m.url, key, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })).status,
      ).toBe(200)
    for (const width of [1280, 390]) {
      const { context, page, errors } = await openPortalPage(browser, m.url, width)
      try {
        await injectWallet(context, dave, CHAIN)
        await signInAt(page, m.url)
        // The first page's table comes with its data, after the sign-in: measured once it is there.
        await page.locator('table').first().waitFor()
        expect(await fitting(page)).toEqual({ page: 'fits', tables: 1, frames: true, cells: true })
        await page.getByRole('link', { name: 'Usage' }).click()
        await page.locator('tr[data-request-id]').nth(4).waitFor()
        expect(await fitting(page)).toEqual({ page: 'fits', tables: 1, frames: true, cells: true })
        const receipt = page.getByRole('link', { name: 'Receipt' }).first()
        const box = (await receipt.boundingBox())!
        expect(box.x + box.width).toBeLessThanOrEqual(width)
        await page.screenshot({ path: screenshotPath(`portal-9-usage-${width}`), fullPage: true })
        expect(errors).toEqual([])
      } finally {
        await context.close()
      }
    }
    const r = await chat(m.url, m.key, {
      model: 'svc/atlas@1',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 8,
    })
    expect((await r.json()).svc.provider).toBe(provider.address)
    await m.server.settler.runOnce()
    for (const width of [1280, 390]) {
      const { context, page, errors } = await openPortalPage(browser, m.url, width)
      try {
        await injectWallet(context, provider, CHAIN)
        await signInAt(page, m.url)
        await page.getByRole('link', { name: 'Provider' }).click()
        await page.getByRole('heading', { name: 'Payouts' }).waitFor()
        await page.locator('.table-wrap').nth(1).waitFor()
        expect(await fitting(page)).toMatchObject({ page: 'fits', frames: true, cells: true })
        await page.screenshot({ path: screenshotPath(`portal-10-provider-${width}`), fullPage: true })
        expect(errors).toEqual([])
      } finally {
        await context.close()
      }
    }
  })
})
