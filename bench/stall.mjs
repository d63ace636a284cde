// What one client's heavy request costs every other client of the same gateway: a short request is sent again and
// again, first alone (the baseline), then while another client's long prompt is in flight, and the slowest short
// request of each phase is compared. The gateway is `svc demo` (SQLite store, simulated providers and vendor, all in
// one process), started from dist/. The heavy request is a prompt of --mb MB of letters at random for svc/cortex@1,
// the slowest kind of text to count, too long for every candidate, so the vendor's context bounds its count.
// Printed: per round, the short requests served meanwhile and their slowest, against the baseline's; as ratios.
// Usage: npm run bench:stall -- [--rounds 3 --mb 3 --baseline-seconds 2]
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchOptions } from './options.mjs'

const o = benchOptions(import.meta.url, {
  rounds: { type: 'string', default: '3' }, mb: { type: 'string', default: '3' }, 'baseline-seconds': { type: 'string', default: '2' },
})
const data = mkdtempSync(join(tmpdir(), 'bench-stall-'))
const gateway = spawn(process.execPath, ['--max-semi-space-size=64', 'dist/cli/main.js', 'demo', '--json', '--port', '0', '--chunk-delay-ms', '0', '--data', data], { stdio: ['ignore', 'pipe', 'inherit'] })
try {
  const { base_url: url, api_key: key } = JSON.parse(await new Promise((resolve) => gateway.stdout.once('data', (d) => resolve(String(d)))))
  const post = async (body) => {
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    await res.arrayBuffer()
    return res.status
  }
  const short = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }
  /** Short requests one after another until `until()`: how many, and the slowest in ms. */
  const shorts = async (until) => {
    let n = 0
    let slowest = 0
    while (!until()) {
      const started = performance.now()
      await post(short)
      slowest = Math.max(slowest, performance.now() - started)
      n++
    }
    return { n, slowest }
  }
  const baselineEnds = performance.now() + Number(o['baseline-seconds']) * 1000
  await shorts(() => performance.now() > baselineEnds - 1000) // warm-up
  const alone = await shorts(() => performance.now() > baselineEnds)
  console.log(`alone: ${alone.n} short requests in 1 s, the slowest ${alone.slowest.toFixed(1)} ms`)
  let letters = ''
  for (let i = 0; i < Number(o.mb) * 1_000_000; i++) letters += String.fromCharCode(97 + Math.floor(Math.random() * 26))
  const rows = []
  for (let round = 0; round < Number(o.rounds); round++) {
    let done = false
    const started = performance.now()
    const heavy = post({ model: 'svc/cortex@1', messages: [{ role: 'user', content: letters }], max_tokens: 4 }).finally(() => (done = true))
    const beside = await shorts(() => done)
    rows.push({ heavy_status: await heavy, heavy_ms: Math.round(performance.now() - started), short_requests: beside.n, slowest_ms: Number(beside.slowest.toFixed(1)), slowest_vs_alone: Number((beside.slowest / alone.slowest).toFixed(1)) })
  }
  console.table(rows)
} finally {
  gateway.kill()
  rmSync(data, { recursive: true, force: true })
}
