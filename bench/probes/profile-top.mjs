// Summarizes a .cpuprofile of the event loop: busy time by concern (each sample goes to the concern of the nearest
// frame, leaf first, that has one: a socket write made by undici counts as a socket write), then self time by place
// and by function. Usage: node bench/probes/profile-top.mjs [dir] [file]
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
const dir = process.argv[2] ?? 'bench/results/profiles'
// The main thread's profile (thread 0); worker threads (the SQLite checkpointer) write their own.
const file =
  process.argv[3] ??
  readdirSync(dir)
    .filter((f) => /\.0\.\d+\.cpuprofile$/.test(f))
    .map((f) => join(dir, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]
const p = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const parentOf = new Map()
for (const n of p.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id)

const CONCERNS = [
  ['idle', (f) => f.functionName === '(idle)'],
  ['garbage collector', (f) => f.functionName === '(garbage collector)'],
  ['socket writes', (f) => !f.url && /^(writev|writeUtf8String|writeLatin1String|writeBuffer)$/.test(f.functionName)],
  ['WAL sync (dispatch to libuv)', (f) => f.functionName === 'fdatasync'],
  ['ledger thread messages', (f) => f.functionName === 'postMessage' || /node:internal\/worker/.test(f.url)],
  [
    'SQLite (statements, commits)',
    (f) => /better-sqlite3|store\/sqlite\/(ledger-ops|hot-ledger)|ledger-thread/.test(f.url),
  ],
  ['token counting', (f) => /metering\/|gpt-tokenizer/.test(f.url)],
  ['undici (upstream client)', (f) => /undici/.test(f.url)],
  ['upstream adapter, SSE parsing', (f) => /dist\/providers\//.test(f.url)],
  ['Fastify', (f) => /fastify|find-my-way|avvio|light-my-request/.test(f.url)],
  ['node http (server)', (f) => /node:_http|node:http/.test(f.url)],
  ['node streams, net', (f) => /node:net|node:internal\/streams?|node:stream/.test(f.url)],
  ['gateway: routes, SSE encoder, errors', (f) => /dist\/api\//.test(f.url)],
  ['gateway: validation, admission, settlement', (f) => /dist\/gateway\//.test(f.url)],
  ['gateway: routing, failover', (f) => /dist\/routing\//.test(f.url)],
  ['gateway: other', (f) => /dist\//.test(f.url)],
  ['node: promises, timers, events, buffers', (f) => /^node:/.test(f.url)],
  ['(program)', (f) => f.functionName === '(program)'],
]
const concern = new Map()
const fn = new Map()
const pkg = new Map()
let total = 0
let idle = 0
p.samples.forEach((s, i) => {
  const n = byId.get(s)
  const dt = p.timeDeltas[i] ?? 0
  total += dt
  let c = 'other'
  for (let id = s; id !== undefined; id = parentOf.get(id)) {
    const hit = CONCERNS.find(([, match]) => match(byId.get(id).callFrame))
    if (hit) {
      c = hit[0]
      break
    }
  }
  if (c === 'idle') idle += dt
  else concern.set(c, (concern.get(c) ?? 0) + dt)
  const url = n.callFrame.url
  const where = url.includes('node_modules/')
    ? url
        .split('node_modules/')[1]
        .split('/')
        .slice(0, url.includes('node_modules/@') ? 2 : 1)
        .join('/')
    : url.includes('/dist/')
      ? 'svc:' + url.split('/dist/')[1]
      : url.startsWith('node:')
        ? url
        : n.callFrame.functionName || '(native)'
  const key = `${n.callFrame.functionName || '(anon)'} ${where}:${n.callFrame.lineNumber + 1}`
  fn.set(key, (fn.get(key) ?? 0) + dt)
  const pk = where.startsWith('svc:') ? where : where.split(':')[0]
  pkg.set(pk, (pkg.get(pk) ?? 0) + dt)
})
const busy = total - idle
const top = (m, n, of = total) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((v / of) * 100).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n')
console.log(
  `${file}\nbusy ${((busy / total) * 100).toFixed(1)} % of the time; busy time by concern:\n${top(concern, 20, busy)}`,
)
console.log(
  `\nself time by place (of all samples, idle included):\n${top(pkg, 18)}\n\nself time by function:\n${top(fn, 25)}`,
)
