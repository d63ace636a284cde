#!/usr/bin/env node
// Builds llama.cpp's `llama-server` from the source node-llama-cpp ships (llama/gitRelease.bundle in engines/), once:
// the binary is kept in a cache outside the checkout (SVC_ENGINE_CACHE, default ~/.cache/svc-engines), keyed by the
// source's commit, so later runs and clones on this machine reuse it. No download: cmake builds the bundled source
// with its web UI left out (LLAMA_USE_PREBUILT_UI=OFF) and without libcurl. Prints the binary's path.
//
// Usage: node scripts/build-llama-server.mjs [--engines DIR] [--check] (--check: print the path if built, else exit 1)
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values: o } = parseArgs({
  options: {
    engines: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'engines') },
    check: { type: 'boolean', default: false },
  },
})
const bundle = join(o.engines, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle')
if (!existsSync(bundle)) {
  console.error(`${bundle} is missing: run npm ci in ${o.engines}`)
  process.exit(1)
}
const commit = execFileSync('git', ['bundle', 'list-heads', bundle], { encoding: 'utf8' }).split(' ')[0].slice(0, 12)
const cache = process.env.SVC_ENGINE_CACHE ?? join(homedir(), '.cache', 'svc-engines')
const binary = join(cache, `llama-server-${commit}`, 'llama-server')
if (existsSync(binary)) {
  console.log(binary)
  process.exit(0)
}
if (o.check) process.exit(1)

const work = join(cache, `build-${commit}-${process.pid}`)
rmSync(work, { recursive: true, force: true })
mkdirSync(work, { recursive: true })
const run = (cmd, args, cwd = work) => execFileSync(cmd, args, { cwd, stdio: ['ignore', process.stderr, 'inherit'] })
const started = Date.now()
console.error(`building llama-server ${commit} in ${work} (about 8 minutes on two cores)…`)
try {
  run('git', ['clone', '--quiet', bundle, 'src'])
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DLLAMA_USE_PREBUILT_UI=OFF',
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
    '-DLLAMA_BUILD_SERVER=ON',
    '-DBUILD_SHARED_LIBS=OFF',
  ]
  run('cmake', ['-S', 'src', '-B', 'build', ...flags])
  run('cmake', ['--build', 'build', '--target', 'llama-server', '-j', '2'])
  mkdirSync(dirname(binary), { recursive: true })
  renameSync(join(work, 'build', 'bin', 'llama-server'), binary)
} finally {
  rmSync(work, { recursive: true, force: true })
}
console.error(`built in ${Math.round((Date.now() - started) / 1000)} s`)
console.log(binary)
