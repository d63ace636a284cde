/**
 * The node flags the gateway runs with: a larger young generation, so the scavenger runs less often under load (why
 * and what it measured: docs/performance.md §5). V8 sizes its heap at start, so the flag must reach node itself
 * (`npm start` passes it; `serve` and `demo` say on stderr when it is missing); a shebang cannot pass it everywhere.
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
  process.stderr.write(
    `note: node was started without ${missing.join(' ')}: the gateway runs, with more time in the garbage collector; start it as \`node ${missing.join(' ')} dist/cli/main.js …\` or set NODE_OPTIONS=${missing.join(' ')}\n`,
  )
}
