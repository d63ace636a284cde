// What one client's heavy request costs every other client of the same gateway: a short request is sent again and
// again, first alone (the baseline), then while another client's heavy request is in flight, and the slowest short
// request of each phase is compared. The gateway is `svc demo` (SQLite store, simulated providers and vendor, all in
// one process), started from dist/. The heavy requests, each of about --mb MB (--kinds, default all):
// - letters: a prompt of letters at random for svc/cortex@1, the slowest kind of text to count, too long for every
//   candidate, so the vendor's context bounds its count;
// - prose: a prompt of words for svc/cortex@1 that the vendor's context takes, counted whole and sent on;
// - history: a history of tens of thousands of short messages;
// - schema: a tool whose parameters are one long array;
// - bias: a logit_bias of as many entries as fit, sent on.
// Printed: per kind and round, the heavy request's status and time, the short requests served meanwhile and their
// slowest, against the baseline's slowest as a ratio. A request that is sent on is parsed again by the simulated
// provider, in the same process: its figures include that.
// Usage: npm run bench:stall -- [--kinds letters,prose,history,schema,bias --rounds 3 --mb 3 --baseline-seconds 2]
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchOptions } from '../options.mjs'

const KINDS = ['letters', 'prose', 'history', 'schema', 'bias']
const o = benchOptions(import.meta.url, {
  kinds: { type: 'string', default: KINDS.join(','), choices: KINDS, list: true },
  rounds: { type: 'string', default: '3' },
  mb: { type: 'string', default: '3' },
  'baseline-seconds': { type: 'string', default: '2' },
})

/** A heavy request body of about `chars` characters of JSON, of each kind. */
function heavyBody(kind, chars) {
  const ask = { model: 'svc/atlas@1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }
  if (kind === 'letters') {
    let letters = ''
    for (let i = 0; i < chars; i++) letters += String.fromCharCode(97 + Math.floor(Math.random() * 26))
    return { ...ask, model: 'svc/cortex@1', messages: [{ role: 'user', content: letters }] }
  }
  if (kind === 'prose') {
    // 100,000 words of a token each: within the demo vendor's context of 131,072, beyond every candidate's.
    const vocabulary = [' the', ' river', ' ran', ' past', ' a', ' quiet', ' town', ' and', ' on', ' into', ' sea']
    const words = Array.from({ length: 100_000 }, (_, i) => vocabulary[(i * 7919) % vocabulary.length]).join('')
    return { ...ask, model: 'svc/cortex@1', messages: [{ role: 'user', content: words }] }
  }
  if (kind === 'history')
    return {
      ...ask,
      messages: Array.from({ length: Math.floor(chars / 34) }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        content: 'hi',
      })),
    }
  if (kind === 'schema')
    return {
      ...ask,
      tools: [
        {
          type: 'function',
          function: { name: 'wide', parameters: { type: 'object', a: new Array(Math.floor(chars / 2)).fill(0) } },
        },
      ],
    }
  return {
    ...ask,
    logit_bias: Object.fromEntries(
      Array.from({ length: Math.min(Math.floor(chars / 10), 9_999_999) }, (_, i) => [String(i), 1]),
    ),
  }
}
const data = mkdtempSync(join(tmpdir(), 'bench-stall-'))
const gateway = spawn(
  process.execPath,
  [
    '--max-semi-space-size=32',
    'dist/cli/main.js',
    'demo',
    '--json',
    '--port',
    '0',
    '--chunk-delay-ms',
    '0',
    '--data',
    data,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
)
try {
  const { base_url: url, api_key: key } = JSON.parse(
    await new Promise((resolve) => gateway.stdout.once('data', (d) => resolve(String(d)))),
  )
  const post = async (body) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
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
  const rows = []
  for (const kind of o.kinds.split(',')) {
    const body = heavyBody(kind, Number(o.mb) * 1_000_000)
    for (let round = 0; round < Number(o.rounds); round++) {
      let done = false
      const started = performance.now()
      const heavy = post(body).finally(() => (done = true))
      const beside = await shorts(() => done)
      rows.push({
        kind,
        heavy_status: await heavy,
        heavy_ms: Math.round(performance.now() - started),
        short_requests: beside.n,
        slowest_ms: Number(beside.slowest.toFixed(1)),
        slowest_vs_alone: Number((beside.slowest / alone.slowest).toFixed(1)),
      })
    }
  }
  console.table(rows)
} finally {
  gateway.kill()
  rmSync(data, { recursive: true, force: true })
}
