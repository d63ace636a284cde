// The layers of src/ (docs/architecture.md §2): a module imports only from its own folder or from folders of a lower
// layer, and no modules import each other in a cycle. Run by `npm run lint`; prints each import that goes up a layer
// and each cycle, and exits 1 when there is one. Tests (`*.test.ts`) may import what they test from any layer.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

/** Lowest first. Folders of one layer do not import each other. */
export const LAYERS = [
  ['protocol', 'ids'],
  ['config'],
  ['money'],
  ['metering'],
  ['limits'],
  ['store'],
  ['auth', 'usage'],
  ['providers', 'engine'],
  ['tools'],
  ['routing'],
  ['accounts'],
  ['chain'],
  ['receipts'],
  ['settlement'],
  ['ops'],
  ['audit'],
  ['gateway'],
  ['api'],
  ['portal'],
  ['server.ts'],
  ['cli'],
]

const SRC = resolve(new URL('..', import.meta.url).pathname, 'src')
const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i])))

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return files(path)
    return name.endsWith('.ts') ? [path] : []
  })
}

/** The config's modules at the root of src/, one unit. */
const CONFIG = new Set(['config-schema.ts', 'tuning.ts', 'config.ts'])

/** The top-level folder (or root file, or the config) a module of src/ belongs to. */
const unitOf = (path) => {
  const top = relative(SRC, path).split('/')[0]
  return CONFIG.has(top) ? 'config' : top
}

/** The modules `path` imports (relative imports, resolved to .ts files of src/). */
function importsOf(path) {
  const text = readFileSync(path, 'utf8')
  const out = []
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'/g))
    out.push(resolve(dirname(path), m[1].replace(/\.js$/, '.ts')))
  return out
}

const all = files(SRC)
const graph = new Map(all.filter((f) => !f.endsWith('.test.ts')).map((f) => [f, importsOf(f)]))
const problems = []
for (const [from, targets] of graph) {
  const unit = unitOf(from)
  const layer = layerOf.get(unit)
  if (layer === undefined) {
    problems.push(`${relative(SRC, from)}: its folder ${unit} has no layer (scripts/check-layers.mjs)`)
    continue
  }
  for (const to of targets) {
    const target = unitOf(to)
    if (target === unit) continue
    const at = layerOf.get(target)
    if (at === undefined || at > layer || (at === layer && target !== unit))
      problems.push(`${relative(SRC, from)} imports ${relative(SRC, to)}: ${unit} may not import ${target}`)
  }
}

// Cycles: strongly connected components of more than one module (Tarjan's algorithm), or a module importing itself.
let index = 0
const stack = []
const state = new Map()
function connect(v) {
  const s = { index, low: index, onStack: true }
  index++
  state.set(v, s)
  stack.push(v)
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue
    const t = state.get(w)
    if (!t) {
      connect(w)
      s.low = Math.min(s.low, state.get(w).low)
    } else if (t.onStack) s.low = Math.min(s.low, t.index)
  }
  if (s.low !== s.index) return
  const component = []
  let w
  do {
    w = stack.pop()
    state.get(w).onStack = false
    component.push(w)
  } while (w !== v)
  if (component.length > 1 || (graph.get(v) ?? []).includes(v))
    problems.push(
      `import cycle: ${component
        .map((f) => relative(SRC, f))
        .sort()
        .join(' ↔ ')}`,
    )
}
for (const v of graph.keys()) if (!state.has(v)) connect(v)

for (const p of problems) console.error(p)
if (problems.length) {
  console.error(`${problems.length} layer problem${problems.length === 1 ? '' : 's'} (docs/architecture.md §2)`)
  process.exit(1)
}
console.log(`layers: ${graph.size} modules, every import downward, no cycle`)
