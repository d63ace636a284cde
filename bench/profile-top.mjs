// Summarizes a .cpuprofile: self time by function and by package, top entries.
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
const dir = process.argv[2] ?? 'bench/results/profiles'
// The main thread's profile (thread 0); worker threads (the SQLite checkpointer) write their own.
const file = process.argv[3] ?? readdirSync(dir).filter((f) => /\.0\.\d+\.cpuprofile$/.test(f)).map((f) => join(dir, f)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]
const p = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const fn = new Map()
const pkg = new Map()
let total = 0
p.samples.forEach((s, i) => {
  const n = byId.get(s)
  const dt = p.timeDeltas[i] ?? 0
  total += dt
  const url = n.callFrame.url
  const where = url.includes('node_modules/') ? url.split('node_modules/')[1].split('/').slice(0, url.includes('node_modules/@') ? 2 : 1).join('/') : url.includes('/dist/') ? 'svc:' + url.split('/dist/')[1] : url.startsWith('node:') ? url : n.callFrame.functionName || '(native)'
  const key = `${n.callFrame.functionName || '(anon)'} ${where}:${n.callFrame.lineNumber + 1}`
  fn.set(key, (fn.get(key) ?? 0) + dt)
  const pk = where.startsWith('svc:') ? where : where.split(':')[0]
  pkg.set(pk, (pkg.get(pk) ?? 0) + dt)
})
const top = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`).join('\n')
console.log(`${file}\nself time by place:\n${top(pkg, 18)}\n\nself time by function:\n${top(fn, 25)}`)
