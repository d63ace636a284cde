// A closed-loop load generator in its own process: `concurrency` connections each sending the next request as
// soon as the previous one ended. Prints one JSON line: requests/s, latency and time-to-first-byte percentiles.
// `key` may be several, comma-separated: requests take them in turn (one account each at the gateway).
// `{{n}}` in the body is replaced by the request's number, so that no two requests (and no two replies of the
// simulated upstream, which follow from the request) are the same text, as in real traffic.
import { Pool } from 'undici'

const [url, bodyJson, concurrencyText, secondsText, warmupText, key] = process.argv.slice(2)
const target = new URL(url)
const concurrency = Number(concurrencyText)
const headerSets = (key ? key.split(',') : ['']).map((k) => ({ 'content-type': 'application/json', ...(k ? { authorization: `Bearer ${k}` } : {}) }))
let turn = 0
const [bodyHead, bodyTail] = bodyJson.split('{{n}}')
let sent = 0
const nextBody = bodyTail === undefined ? () => bodyJson : () => bodyHead + sent++ + bodyTail
const pool = new Pool(target.origin, { connections: concurrency, pipelining: 1 })

async function phase(seconds, record) {
  const latencies = []
  const ttfbs = []
  let errors = 0
  const end = performance.now() + seconds * 1000
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const t0 = performance.now()
      try {
        const headers = headerSets[turn++ % headerSets.length]
        const res = await pool.request({ path: target.pathname, method: 'POST', headers, body: nextBody() })
        let first
        for await (const _ of res.body) first ??= performance.now() - t0
        if (res.statusCode !== 200) errors++
        else if (record) {
          latencies.push(performance.now() - t0)
          ttfbs.push(first ?? performance.now() - t0)
        }
      } catch {
        errors++
      }
    }
  }))
  return { latencies, ttfbs, errors }
}

const pct = (xs, p) => {
  if (!xs.length) return null
  const s = Float64Array.from(xs).sort()
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(3)
}

await phase(Number(warmupText), false)
const seconds = Number(secondsText)
const { latencies, ttfbs, errors } = await phase(seconds, true)
await pool.close()
console.log(JSON.stringify({
  requests: latencies.length, errors, rps: Math.round(latencies.length / seconds),
  p50_ms: pct(latencies, 50), p99_ms: pct(latencies, 99), ttfb_p50_ms: pct(ttfbs, 50), ttfb_p99_ms: pct(ttfbs, 99),
}))
