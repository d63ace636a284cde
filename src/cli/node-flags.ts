/**
 * The node flags the gateway runs with. V8's young generation (two semi-spaces) grows to 16 MiB by default; a streamed
 * request allocates about 124 KB in the gateway, so under load the scavenger ran every hundred requests and each time
 * copied the objects of every request in flight. With 64 MiB semi-spaces it runs a quarter as often for the same
 * copies: GC pauses per stream at concurrency 64 fell from 17–34 µs to 7 µs, and duels gave 1.01–1.13× the
 * requests per second, the most on a quick machine, where the default's scavenges overflowed into the old generation
 * (docs/performance-log.md, "A larger young generation").
 *
 * V8 sizes its heap when the process starts, so the flag must reach node itself: `npm start` passes it, the README
 * tells operators to (`node --max-semi-space-size=64 dist/cli/main.js serve`, or NODE_OPTIONS), and the benchmarks
 * start the gateway with these flags. `serve` and `demo` say on stderr when it is missing. The shebang stays
 * `#!/usr/bin/env node`: `env -S`, which a shebang needs to pass flags, is missing from BusyBox (Alpine images), where
 * every `svc` command would then fail to start.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64']

/** The gateway's flags that neither node's command line nor NODE_OPTIONS sets (any value of a flag counts as set). */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].map((arg) => arg.split('=')[0]!.replaceAll('_', '-'))
  return GATEWAY_NODE_FLAGS.filter((flag) => !given.includes(flag.split('=')[0]!))
}

/** One line on stderr when this process lacks the gateway's node flags (the server runs, only slower). */
export function noteMissingNodeFlags(): void {
  const missing = missingNodeFlags(process.execArgv, process.env.NODE_OPTIONS)
  if (missing.length === 0) return
  process.stderr.write(`note: node was started without ${missing.join(' ')}: the gateway runs, with more time in the garbage collector; start it as \`node ${missing.join(' ')} dist/cli/main.js …\` or set NODE_OPTIONS=${missing.join(' ')}\n`)
}
