import { readFileSync } from 'node:fs'
import { load } from './processes.mjs'

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024

/**
 * A long closed loop of 64 connections against the gateway process `pid` at `url`, its RSS sampled each second: how
 * its memory moves over `seconds` (a leak raises the floor part after part).
 */
export async function soak({ pid, url, key }, body, seconds) {
  const samples = []
  const warmup = 5
  // Sampled from the end of the load generator's warm-up: the heap's state when the soak begins is the previous
  // figures' (another mode, another concurrency), not this load's.
  let timer
  const begin = setTimeout(() => (timer = setInterval(() => samples.push(+rssMb(pid).toFixed(1)), 1000)), warmup * 1000)
  const r = await load(url, body, { concurrency: 64, seconds, warmup, key })
  clearTimeout(begin)
  clearInterval(timer)
  // V8's heap grows in a sawtooth (tens of MB between major collections): compare whole thirds of the run, and their
  // floors (RSS just after a collection), rather than single samples.
  const third = Math.max(1, Math.floor(samples.length / 3))
  const first = samples.slice(0, third)
  const last = samples.slice(-third)
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  const sixths = (xs) =>
    Array.from({ length: 6 }, (_, i) =>
      xs.slice(Math.floor((i * xs.length) / 6), Math.floor(((i + 1) * xs.length) / 6)),
    ).filter((p) => p.length > 0)
  return {
    seconds,
    requests: r.requests,
    rps: r.rps,
    rss_mb_mean_first_third: +mean(first).toFixed(1),
    rss_mb_mean_last_third: +mean(last).toFixed(1),
    growth_mean: mean(last) / mean(first) - 1,
    rss_mb_floor_first_third: Math.min(...first),
    rss_mb_floor_last_third: Math.min(...last),
    growth_floor: Math.min(...last) / Math.min(...first) - 1,
    // A leak raises the floor part after part; the collector's rhythm moves the peaks and the means, not the floors.
    rss_mb_floor_by_sixth: sixths(samples).map((xs) => Math.min(...xs)),
    samples,
  }
}
