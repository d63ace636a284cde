import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { cleanEnv, daemon, type Daemon } from './helpers/cli.js'
import { hasAnvil } from './helpers/chain.js'

const run = promisify(execFile)

// The one line of Node `svc demo --rail anvil` prints for paying with x402, run as a user would paste it: with the
// unmodified @x402/fetch, @x402/evm and viem this checkout has installed.

describe.skipIf(!hasAnvil)('the x402 example the demo prints', () => {
  let demo: Daemon | undefined
  const dir = mkdtempSync(join(tmpdir(), 'svc-demo-x402-'))
  afterAll(async () => {
    await demo?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('pays for a chat completion with no key, and is served', async () => {
    const data = join(dir, 'demo')
    demo = await daemon(['demo', '--rail', 'anvil', '--port', '0', '--data', data, '--no-real-model'], /X402_KEY=.*\n/)
    const line = demo
      .output()
      .split('\n')
      .find((l) => l.trimStart().startsWith('X402_KEY='))!
      .trim()
    const { stdout } = await run('sh', ['-c', line], { env: cleanEnv(), timeout: 60_000 })
    // Status, the settlement header's presence, and the reply's text.
    expect(stdout).toMatch(/^200 paid \S+/)
  }, 90_000)
})
