import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import type { PrivateKeyAccount } from 'viem/accounts'

/** Debian's Chromium, driven by playwright-core; browser tests skip themselves when it is not installed. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const hasChromium = existsSync(CHROMIUM)
export const ARTIFACTS = resolve('test/artifacts')

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Playwright gives every launch a fresh temporary profile (--user-data-dir), removed on close. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, timeout: 30_000 })
}

function newest(dir: string): number {
  let t = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs)
  }
  return t
}

/** The built front end: dist/web when it is newer than its sources (npm test builds it), else a fresh build of them. */
export async function portalWebRoot(): Promise<string> {
  const built = resolve('dist/web/index.html')
  const sources = Math.max(newest(resolve('web/portal')), statSync(resolve('src/money/usdc.ts')).mtimeMs)
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return resolve('dist/web')
  const outDir = mkdtempSync(join(tmpdir(), 'svc-web-'))
  const { build } = await import('vite')
  await build({
    configFile: resolve('web/portal/vite.config.ts'),
    logLevel: 'silent',
    build: { outDir, emptyOutDir: true, sourcemap: false },
  })
  return outDir
}

export interface TestWallet {
  /** Every message the page asked the wallet to sign, as text. */
  signed: string[]
}

/**
 * A test wallet in the page, as an extension would inject it: window.ethereum (EIP-1193) whose personal_sign is
 * answered in the test process by a viem account, so the key never enters the page.
 */
export async function injectWallet(
  context: BrowserContext,
  account: PrivateKeyAccount,
  chainId: number,
): Promise<TestWallet> {
  const wallet: TestWallet = { signed: [] }
  await context.exposeFunction('__svcTestWalletSign', async (hex: `0x${string}`) => {
    wallet.signed.push(Buffer.from(hex.slice(2), 'hex').toString('utf8'))
    return account.signMessage({ message: { raw: hex } })
  })
  await context.addInitScript(
    ({ address, chainId }) => {
      const sign = (hex: string) =>
        (window as unknown as { __svcTestWalletSign(hex: string): Promise<string> }).__svcTestWalletSign(hex)
      ;(window as unknown as { ethereum: unknown }).ethereum = {
        isSvcTestWallet: true,
        async request({ method, params }: { method: string; params?: unknown[] }) {
          switch (method) {
            case 'eth_requestAccounts':
            case 'eth_accounts':
              return [address]
            case 'eth_chainId':
              return `0x${chainId.toString(16)}`
            case 'personal_sign':
              return sign(String(params?.[0]))
            default:
              throw Object.assign(new Error(`test wallet: ${method} is not supported`), { code: 4200 })
          }
        },
      }
    },
    { address: account.address, chainId },
  )
  return wallet
}

export function screenshotPath(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true })
  return join(ARTIFACTS, `${name}.png`)
}

/**
 * A fresh context and page on the portal at `url`, `width` pixels wide; `errors` collects the page's errors (not the
 * refused requests it expects: a 401 before sign-in, a 403 it provokes).
 */
export async function openPortalPage(
  browser: Browser,
  url: string,
  width = 1200,
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 860 } })
  context.setDefaultTimeout(10_000)
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  page.on(
    'console',
    (msg) =>
      void (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource') && errors.push(msg.text())),
  )
  return { context, page, errors }
}

/** Signs in with the injected wallet from the sign-in page at `url` and waits for the keys page. */
export async function signInAt(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/portal`)
  await page.getByRole('button', { name: 'Sign in with browser wallet' }).click()
  await page.getByRole('heading', { name: 'API keys' }).waitFor()
}
