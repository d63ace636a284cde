// A load generator in its own process. Closed loop (the default): `concurrency` connections each sending the next
// request as soon as the previous one ended. Open loop (`rate` > 0): requests leave on a fixed schedule, `rate` a
// second whatever the answers do, over up to `concurrency` connections; a request is timed from the moment it left
// (the load generator's own lateness is not the target's), and a target that falls behind finds requests waiting for
// a connection, which counts. Prints one JSON line: requests/s, latency and time-to-first-byte percentiles, and, in
// an open loop, how far behind its schedule the generator itself ran (`late_p99_ms`), and its own CPU per answer.
// `key` may be several, comma-separated: requests take them in turn (one account each at the gateway).
// `{{n}}` in the body is replaced by the request's number, so that no two requests (and no two replies of the
// simulated upstream, which follow from the request) are the same text, as in real traffic.
import { Pool } from 'undici'

const [url, bodyJson, concurrencyText, secondsText, warmupText, key, rateText] = process.argv.slice(2)
const target = new URL(url)
const concurrency = Number(concurrencyText)
const rate = Number(rateText ?? 0)
const headerSets = (key ? key.split(',') : ['']).map((k) => ({
  'content-type': 'application/json',
  ...(k ? { authorization: `Bearer ${k}` } : {}),
}))
let turn = 0
const [bodyHead, bodyTail] = bodyJson.split('{{n}}')
let sent = 0
const nextBody = bodyTail === undefined ? () => bodyJson : () => bodyHead + sent++ + bodyTail
const pool = new Pool(target.origin, { connections: concurrency, pipelining: 1 })

/** One request, timed from now; its latency and time to first byte go to `into` (unless it failed). */
async function one(into) {
  const t0 = performance.now()
  try {
    const headers = headerSets[turn++ % headerSets.length]
    const res = await pool.request({ path: target.pathname, method: 'POST', headers, body: nextBody() })
    let first
    for await (const _ of res.body) first ??= performance.now() - t0
    if (res.statusCode !== 200) into.errors++
    else if (into.record) {
      into.latencies.push(performance.now() - t0)
      into.ttfbs.push(first ?? performance.now() - t0)
    }
  } catch {
    into.errors++
  }
}

async function closedPhase(seconds, into) {
  const end = performance.now() + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) await one(into)
    }),
  )
  return seconds
}

/**
 * Requests leave at start + i/rate. A timer checks every millisecond and sends what is due, so a request leaves a
 * millisecond or two late, more when the machine is busy (`late`); each is timed from its own departure. Returns how
 * long the phase took to its last answer, which is longer than `seconds` when the target fell behind.
 */
async function openPhase(seconds, into) {
  const start = performance.now()
  const total = Math.round(seconds * rate)
  const inFlight = new Set()
  let issued = 0
  await new Promise((done) => {
    const tick = () => {
      const now = performance.now()
      const due = Math.min(total, Math.floor(((now - start) * rate) / 1000) + 1)
      for (; issued < due; issued++) {
        if (into.record) into.late.push(now - (start + (issued * 1000) / rate))
        const p = one(into)
        inFlight.add(p)
        p.finally(() => inFlight.delete(p))
      }
      if (issued < total) setTimeout(tick, 1)
      else done()
    }
    tick()
  })
  await Promise.all(inFlight)
  return (performance.now() - start) / 1000
}

const pct = (xs, p) => {
  if (!xs.length) return null
  const s = Float64Array.from(xs).sort()
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(3)
}

const phase = rate > 0 ? openPhase : closedPhase
await phase(Number(warmupText), { record: false, latencies: [], ttfbs: [], late: [], errors: 0 })
const seconds = Number(secondsText)
const r = { record: true, latencies: [], ttfbs: [], late: [], errors: 0 }
// Answers over the time they took: in an open loop a target that fell behind took longer than its schedule.
const cpu0 = process.cpuUsage()
const took = await phase(seconds, r)
const cpu = process.cpuUsage(cpu0)
await pool.close()
console.log(
  JSON.stringify({
    requests: r.latencies.length,
    errors: r.errors,
    rps: Math.round(r.latencies.length / took),
    p50_ms: pct(r.latencies, 50),
    p99_ms: pct(r.latencies, 99),
    ttfb_p50_ms: pct(r.ttfbs, 50),
    ttfb_p99_ms: pct(r.ttfbs, 99),
    ...(rate > 0 ? { late_p99_ms: pct(r.late, 99) } : {}),
    // The load generator's own CPU per answer (µs): what it takes from a machine it shares with the target.
    cpu_us_per_request: r.latencies.length ? Math.round((cpu.user + cpu.system) / r.latencies.length) : null,
  }),
)
