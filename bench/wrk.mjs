// wrk (Debian's package) as a load generator: a closed loop of `concurrency` connections on one thread of C, which
// takes a fraction of the CPU bench/loadgen.mjs does per request, so a machine of two cores has more left for the
// targets.
// Resolves with the figures bench/loadgen.mjs gives (requests, errors, rps, p50_ms, p99_ms; no time to first byte); its
// percentiles, unlike loadgen's, include responses with an error status, so compare them only where errors are 0.
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Whether wrk is installed. */
export function hasWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' })
    return true
  } catch (err) {
    // wrk prints its usage and exits 1 for --version; only a missing binary is ENOENT.
    return err.code !== 'ENOENT'
  }
}

let runs = 0

/** `seconds` of load (after `warmup` seconds whose figures are dropped) at `url` with `body` and a bearer `key`. */
export async function wrkLoad(url, body, { concurrency, seconds, warmup = 0, key = '' }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-wrk-'))
  const bodyFile = join(dir, 'body.json')
  writeFileSync(bodyFile, JSON.stringify(body))
  const run = (secs) =>
    new Promise((resolve, reject) => {
      const tag = `${process.pid}.${runs++}`
      const args = [
        '-t1',
        `-c${concurrency}`,
        `-d${secs}s`,
        '--timeout',
        '10s',
        '-s',
        SCRIPT,
        url,
        '--',
        bodyFile,
        key,
        tag,
      ]
      execFile('wrk', args, { encoding: 'utf8' }, (err, stdout, stderr) => {
        const line = stdout?.split('\n').find((l) => l.startsWith('{"requests"'))
        if (err || !line) reject(new Error(`wrk failed: ${err?.message ?? ''} ${stdout} ${stderr}`))
        else resolve(JSON.parse(line))
      })
    })
  try {
    if (warmup > 0) await run(warmup)
    const r = await run(seconds)
    // Responses with an error status are among wrk's requests; requests that failed without one are not.
    const ok = r.requests - r.status_errors
    return {
      requests: ok,
      errors: r.status_errors + r.failed,
      rps: Math.round(ok / (r.duration_us / 1e6)),
      p50_ms: r.p50_us / 1000,
      p99_ms: r.p99_us / 1000,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const SCRIPT = fileURLToPath(new URL('./wrk.lua', import.meta.url))
