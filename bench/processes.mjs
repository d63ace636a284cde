// What the HTTP benchmarks share: starting a process that announces itself with a JSON line, reading its CPU time,
// the gateway's config over the simulated upstream, a funded key, the load generator (closed or open loop), the disk's
// floor for a durable capture, and what a hand-off between threads costs.
import { spawn, execFileSync } from 'node:child_process'
import {
  closeSync,
  cpSync,
  existsSync,
  fdatasyncSync,
  fstat,
  fstatSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

export const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim())
const children = []
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')))

/** Kills `child` when this script exits, however it ends (a refusal, an error), so no bench process outlives it. */
export function killOnExit(child) {
  children.push(child)
  return child
}

/**
 * A bench child's environment: this process's, without a store or port of its own (the config names them), one gateway
 * process unless the bench asks for workers (SVC_WORKERS), and `env`.
 */
export const childEnv = (env = {}) => ({ ...process.env, DATABASE_URL: '', PORT: '', SVC_WORKERS: '1', ...env })

/**
 * Starts `node args` (in `cwd`, with `env` added to this process's) and resolves with its first stdout line that has a
 * `base_url`, parsed as JSON.
 */
export function start(args, { nodeArgs = [], cwd, env } = {}) {
  const child = killOnExit(
    spawn(process.execPath, [...nodeArgs, ...args], { cwd, stdio: ['ignore', 'pipe', 'inherit'], env: childEnv(env) }),
  )
  return new Promise((resolve, reject) => {
    // The first line with a base_url (a gateway that logs may write lines before it); what follows is drained unread.
    let out = ''
    let ready = false
    child.stdout.setEncoding('utf8').on('data', (d) => {
      if (ready) return
      out += d
      const line = out
        .split('\n')
        .slice(0, -1)
        .find((l) => l.includes('"base_url"'))
      if (line === undefined) return
      ready = true
      out = ''
      resolve({ child, info: JSON.parse(line) })
    })
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)))
  })
}

/**
 * Starts `svc serve` of the build in `root` (default: this checkout) as its README says to run it: with that build's
 * node flags (`gatewayNodeFlags`), then `nodeArgs`; `env` is added to its environment.
 */
export async function startGateway(config, { root = '.', nodeArgs = [], env } = {}) {
  return start(['dist/cli/main.js', 'serve', '--config', config, '--json'], {
    cwd: root,
    env,
    nodeArgs: [...(await gatewayNodeFlags(root)), ...nodeArgs],
  })
}

/**
 * The node flags the build in `root` wants for its gateway (`GATEWAY_NODE_FLAGS`, src/cli/node-flags.ts). A build
 * without that module (before 2026-11-24's eleventh session) runs on node's defaults, as it did.
 */
export async function gatewayNodeFlags(root = '.') {
  const module = resolve(root, 'dist/cli/node-flags.js')
  return existsSync(module) ? [...(await import(pathToFileURL(module).href)).GATEWAY_NODE_FLAGS] : []
}

/** The median of the numbers in `xs` (the mean of the middle two when they are even), skipping null; null if none. */
export function median(xs) {
  const v = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b)
  if (v.length === 0) return null
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2
}

/** User + system CPU (µs) of a process (all its threads), or of its main thread alone (the event loop). */
export function cpuUs(pid, mainThread = false) {
  const f = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8')
    .split(') ')[1]
    .split(' ')
  return (Number(f[11]) + Number(f[12])) * TICK_US
}

/** A process's resident memory (MB), from /proc. */
export const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024

/**
 * The machine's CPU time so far, all cores (µs): busy (user, system and interrupts) and in all. Time stolen by the
 * host counts in all but not as busy: this machine's processes did not use it.
 */
export function machineCpuUs() {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number)
  return {
    busy: (user + nice + system + irq + softirq) * TICK_US,
    all: (user + nice + system + idle + iowait + irq + softirq + steal) * TICK_US,
  }
}

export const BENCH_MODEL = 'svc/bench@1'
export const BENCH_WALLET = '0x00000000000000000000000000000000000000b0'
/** The reference offer's provider and the audit account, of a bench with audits. */
export const BENCH_REFERENCE = '0x00000000000000000000000000000000000000bf'
export const BENCH_AUDITOR = '0x00000000000000000000000000000000000000a0'

/** The bench's `i`th wallet (the first is BENCH_WALLET). */
export const benchWallet = (i) => (i === 0 ? BENCH_WALLET : `0x${(0xb00000 + i).toString(16).padStart(40, '0')}`)

/**
 * Writes a gateway config in `dir` (SQLite file store unless `config` names another, local rail, one provider: the
 * simulated upstream at `upstreamUrl`), funds `accounts` bench wallets, and returns the config's path, their API keys
 * (comma-separated, one per account), and a function running the CLI of the build in `root` against the config. One
 * wallet is funded through that CLI; more through the build's own store code in this process (three CLI runs per
 * wallet would take minutes), before any gateway opens the store.
 */
export async function benchGateway(root, dir, upstreamUrl, { accounts = 1, config: extra = {}, limits, audits } = {}) {
  const config = join(dir, 'config.json')
  // With `audits` ({ intervalMs } or true): a dearer second offer of the model at the same upstream, which gets no
  // traffic, as the model's reference; with an interval the gateway audits the first offer against it that often.
  const reference = audits
    ? [
        {
          address: BENCH_REFERENCE,
          baseUrl: upstreamUrl,
          bundle: 'bench',
          profile: 'reference',
          offers: [
            {
              model: BENCH_MODEL,
              upstreamModel: 'bench',
              input_price_per_mtok: '300000',
              output_price_per_mtok: '1200000',
              maxConcurrency: 4096,
            },
          ],
        },
      ]
    : []
  const audit =
    audits?.intervalMs !== undefined
      ? {
          audit: {
            wallet: BENCH_AUDITOR,
            references: { [BENCH_MODEL]: BENCH_REFERENCE },
            intervalMs: audits.intervalMs,
          },
        }
      : {}
  writeFileSync(
    config,
    JSON.stringify({
      listen: { host: '127.0.0.1', port: 0 },
      store: `sqlite:${join(dir, 'svc.db')}`,
      rail: { kind: 'local' },
      feeBps: 500,
      models: [
        {
          id: BENCH_MODEL,
          owned_by: 'bench',
          contextLimit: 32768,
          capabilities: {
            workload: 'chat',
            tools: false,
            structuredOutputs: false,
            reasoning: false,
            streaming: true,
            maxOutputTokens: 4096,
          },
        },
      ],
      providers: [
        {
          address: '0x00000000000000000000000000000000000000be',
          baseUrl: upstreamUrl,
          bundle: 'bench',
          profile: 'sim',
          offers: [
            {
              model: BENCH_MODEL,
              upstreamModel: 'bench',
              input_price_per_mtok: '150000',
              output_price_per_mtok: '600000',
              maxConcurrency: 4096,
            },
          ],
        },
        ...reference,
      ],
      tuning: { settleIntervalMs: 0 },
      ...audit,
      ...extra,
    }),
  )
  const cli = (...args) =>
    JSON.parse(
      execFileSync(process.execPath, ['dist/cli/main.js', ...args, '--config', config, '--json'], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: '' },
      }).toString(),
    )
  if (audit.audit) {
    cli('deposit', '--wallet', BENCH_AUDITOR, '--amount', '1000000')
    cli('approve', '--wallet', BENCH_AUDITOR, '--amount', '1000000')
  }
  if (accounts === 1) {
    cli('deposit', '--wallet', BENCH_WALLET, '--amount', '1000000')
    cli('approve', '--wallet', BENCH_WALLET, '--amount', '1000000')
    const limited = Object.entries(limits ?? {}).flatMap(([name, v]) => [`--${name.replace('_', '-')}`, String(v)])
    return { config, key: cli('key', 'create', '--wallet', BENCH_WALLET, ...limited).api_key, cli }
  }
  const build = (path) => import(pathToFileURL(resolve(root, 'dist', path)).href)
  const { openStore } = await build('store/open.js')
  const ops = await build('accounts/operations.js')
  const { parseUsdc } = await build('money/usdc.js')
  const keyLimits = limits && {
    rpm: limits.rpm ?? null,
    tpm: limits.tpm ?? null,
    spend: limits.limit ? { limit: parseUsdc(String(limits.limit)), reset: limits.limit_reset ?? 'none' } : null,
  }
  const store = await openStore(extra.store ?? `sqlite:${join(dir, 'svc.db')}`)
  const keys = []
  try {
    for (let i = 0; i < accounts; i++) {
      const { account } = await ops.openAccount(store, benchWallet(i), Date.now())
      await ops.depositTo(store, account.id, 10n ** 12n, Date.now())
      await ops.approveCap(store, account.id, 10n ** 12n)
      keys.push(
        (
          await ops.issueKey({
            store,
            accountId: account.id,
            name: 'bench',
            now: Date.now(),
            ...(keyLimits ? { limits: keyLimits } : {}),
          })
        ).key,
      )
    }
  } finally {
    await store.close()
  }
  return { config, key: keys.join(','), cli }
}

/**
 * Runs bench/loadgen.mjs (its own process) and resolves with its JSON figures: a closed loop of `concurrency`
 * connections, or with `rate` > 0 an open loop sending `rate` requests a second over up to `concurrency` connections.
 */
export function load(url, body, { concurrency, seconds, warmup = 0, key, rate = 0 }) {
  const args = [
    new URL('./loadgen.mjs', import.meta.url).pathname,
    url,
    JSON.stringify(body),
    String(concurrency),
    String(seconds),
    String(warmup),
    key ?? '',
    String(rate),
  ]
  return new Promise((resolve, reject) => {
    // Not left to run its time out if this script ends first.
    const child = killOnExit(spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] }))
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d))
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`loadgen exited ${code}`))))
  })
}

// Each request's own: the load generator puts its number in place of {{n}}, so that prompts and the simulated
// upstream's replies differ from one request to the next as in real traffic, and are counted as such (not found in the
// gateway's count cache).
export const MESSAGES = [{ role: 'user', content: 'Tell me something about the river and the harbor ({{n}}).' }]

/** A work tree of the base ref beside this checkout, built with this checkout's node_modules. */
export function buildBase(ref) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-duel-base-'))
  execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { stdio: 'ignore' })
  process.on('exit', () => {
    rmSync(dir, { recursive: true, force: true })
    execFileSync('git', ['worktree', 'prune'], { stdio: 'ignore' })
  })
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'))
  execFileSync(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
    cwd: dir,
    stdio: 'inherit',
  })
  // The portal's page is not on the request path: this checkout's bundle serves for both.
  if (existsSync('dist/web')) cpSync('dist/web', join(dir, 'dist/web'), { recursive: true })
  return dir
}

/**
 * What the disk alone adds to a charged reply: the wall time of an fdatasync after a 4 KiB overwrite in the store's
 * directory (a group's WAL frames, rewritten in place), with nothing else running. Every capture acknowledged to a
 * client waits for one, so no added p50 can be below this one's. `pauseMs` asleep before each write: on this
 * project's VM a sync after a quiet spell takes longer than one right after another (docs/performance.md, "What
 * bounds them"), and at concurrency 1 each of the gateway's syncs comes after one.
 */
export function syncFloor(directory, pauseMs = 0) {
  const path = join(directory, 'sync-floor')
  const fd = openSync(path, 'w+')
  const page = Buffer.alloc(4096, 1)
  for (let i = 0; i < 64; i++) writeSync(fd, page, 0, page.length, i * page.length)
  fdatasyncSync(fd)
  const asleep = new Int32Array(new SharedArrayBuffer(4))
  const ms = []
  for (let i = 0; i < 400; i++) {
    if (pauseMs > 0) Atomics.wait(asleep, 0, 0, pauseMs)
    writeSync(fd, page, 0, page.length, (i % 64) * page.length)
    const t0 = performance.now()
    fdatasyncSync(fd)
    ms.push(performance.now() - t0)
  }
  closeSync(fd)
  rmSync(path)
  ms.sort((a, b) => a - b)
  return { p50_ms: +ms[200].toFixed(3), p99_ms: +ms[396].toFixed(3) }
}

/**
 * What handing work to another thread costs the thread that hands it, on this machine: the calling thread's CPU (µs)
 * for one `fstat` done inline, and for one done on libuv's pool with a `busyMs` spin before each, long enough for the
 * pool's thread to have gone to sleep (as between a gateway's WAL syncs), less the spin. The difference is the
 * wake-up of a sleeping thread and the notice of its end: a few µs on bare metal, tens where a virtual machine makes
 * every cross-core wake-up an exit to its host (this project's VM). Every WAL sync pays it once.
 */
export async function poolRoundTrip(directory, busyMs = 0.3, n = 2000) {
  const path = join(directory, 'round-trip')
  const fd = openSync(path, 'w')
  // The scheduler's count of this thread's time on a CPU, in ns (`/proc/<pid>/stat` counts in ticks of 10 ms). Linux
  // brings a running thread's count up to date when its process's CPU time is read, so `cpuUsage` is read first.
  const self = () => {
    process.cpuUsage()
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1000
  }
  const spin = () => {
    const end = performance.now() + busyMs
    while (performance.now() < end);
  }
  let c0 = self()
  for (let i = 0; i < n; i++) fstatSync(fd)
  const inline = (self() - c0) / n
  c0 = self()
  for (let i = 0; i < n; i++) spin()
  const spun = self() - c0
  c0 = self()
  for (let i = 0; i < n; i++) {
    spin()
    await new Promise((resolve) => fstat(fd, resolve))
  }
  const pooled = (self() - c0 - spun) / n
  closeSync(fd)
  rmSync(path)
  return { inline_us: +inline.toFixed(1), pooled_us: +pooled.toFixed(1) }
}
