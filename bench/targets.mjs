// The performance targets (docs/performance.md §2) checked against one run's ratios (gateway over the raw proxy)
// and its soak: one row per target and figure, with the limit and whether this run met it. A figure the run did
// not measure is left out, not passed.
// Throughput is checked at the targets' concurrencies (16, 64); added p50 and p99 for plain requests at every
// concurrency and in the open loop ('open': a fixed rate both targets can serve, where added latency is the gateway's
// own and not the queue a saturated closed loop builds), a stream's added latency by its first byte.

const TARGETS = [
  { target: 'plain throughput ≥ 0.6× raw', mode: 'plain', at: [16, 64], field: 'rps gateway/raw', atLeast: 0.6 },
  { target: 'added p50 ≤ 0.3 ms', mode: 'plain', field: 'added p50 ms', atMost: 0.3 },
  { target: 'added p99 ≤ 2 ms', mode: 'plain', field: 'added p99 ms', atMost: 2 },
  { target: 'streams/s ≥ 0.7× raw', mode: 'stream', at: [16, 64], field: 'rps gateway/raw', atLeast: 0.7 },
  { target: 'added time to first byte ≤ 1 ms', mode: 'stream', field: 'added ttfb p50 ms', atMost: 1 },
]

/** The targets' rows for `ratios` (bench/http.mjs) and `soak` (null when the run had none). */
export function checkTargets(ratios, soak) {
  const rows = []
  for (const t of TARGETS) {
    for (const r of ratios.filter((x) => x.mode === t.mode && (!t.at || t.at.includes(x.concurrency)))) {
      const value = r[t.field]
      if (value === null || value === undefined || Number.isNaN(value)) continue
      rows.push(
        row(
          t.target,
          r.concurrency === 'open' ? `${t.mode} open loop, ${r.rate}/s` : `${t.mode} c=${r.concurrency}`,
          value,
          t,
        ),
      )
    }
  }
  if (soak) {
    const rss = { target: 'RSS flat within 10 % over the soak', within: 0.1 }
    rows.push(row(rss.target, `floor, c=64 for ${soak.seconds} s`, soak.growth_floor, rss))
    rows.push(row(rss.target, `mean, c=64 for ${soak.seconds} s`, soak.growth_mean, rss))
  }
  return rows
}

function row(target, where, value, { atLeast, atMost, within }) {
  if (atLeast !== undefined) return { target, where, value, limit: `≥ ${atLeast}`, met: value >= atLeast }
  if (atMost !== undefined) return { target, where, value, limit: `≤ ${atMost}`, met: value <= atMost }
  return { target, where, value, limit: `within ±${within}`, met: Math.abs(value) <= within }
}
