#!/usr/bin/env node
// Builds the project (npm run build) only when a source is newer than the last build: `npm start` and `npm test`
// then start at once on an unchanged tree. The build's stamp is dist/.built, written after a build that succeeded.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const STAMP = join(ROOT, 'dist', '.built')
const INPUTS = ['src', 'web/portal', 'tsconfig.json', 'package.json', 'package-lock.json']

/** The newest modification time under `path` (a file or a folder), 0 when it does not exist. */
function newest(path) {
  if (!existsSync(path)) return 0
  const s = statSync(path)
  if (!s.isDirectory()) return s.mtimeMs
  let t = s.mtimeMs
  for (const entry of readdirSync(path)) if (entry !== 'node_modules') t = Math.max(t, newest(join(path, entry)))
  return t
}

const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0
const changed = Math.max(...INPUTS.map((p) => newest(join(ROOT, p))))
if (built > 0 && changed <= built) process.exit(0)
console.error(built ? 'sources changed since the last build: building' : 'no build yet: building')
const started = Date.now()
const run = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' })
if (run.status !== 0) process.exit(run.status ?? 1)
writeFileSync(STAMP, `${new Date(started).toISOString()}\n`)
