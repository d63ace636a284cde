import { setFlagsFromString } from 'node:v8'

/**
 * The node flags the gateway runs with: a larger young generation, so the scavenger runs less often under load (why
 * and what it measured: docs/performance.md §5). V8 sizes its heap at start, so the flag must reach node itself
 * (`npm start` passes it; `serve` and `demo` say on stderr when it is missing); a shebang cannot pass it everywhere.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32']

/**
 * V8 settings a gateway process gives itself as it starts (`setFlagsFromString`; NODE_OPTIONS cannot carry them):
 * the old generation may grow to 1.5× what survived its last full collection before the next one, instead of V8's
 * own factor of up to 4× (in every case, the smaller ones V8 takes when memory runs short among them), so a process's
 * memory stays flat under load rather than climbing between full collections (why and what it costs:
 * docs/performance.md §5).
 */
export const GATEWAY_V8_SETTINGS: readonly string[] = ['--heap-growing-percent=50']

/** The V8 settings of GATEWAY_V8_SETTINGS that node's command line does not set itself (an operator's value stands). */
export function v8SettingsToApply(execArgv: readonly string[]): string[] {
  return notGiven(GATEWAY_V8_SETTINGS, execArgv)
}

/** Applies GATEWAY_V8_SETTINGS to this process (a gateway's command, before it serves). */
export function applyGatewayV8Settings(): void {
  for (const setting of v8SettingsToApply(process.execArgv)) setFlagsFromString(setting)
}

/** The gateway's flags that neither node's command line nor NODE_OPTIONS sets (any value of a flag counts as set). */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  return notGiven(GATEWAY_NODE_FLAGS, [...execArgv, ...nodeOptions.split(/\s+/)])
}

/** The flags of `flags` whose name none of `args` gives, with any value and either spelling (`-` or `_`). */
function notGiven(flags: readonly string[], args: readonly string[]): string[] {
  const name = (arg: string) => arg.split('=')[0]!.replaceAll('_', '-')
  const given = args.map(name)
  return flags.filter((flag) => !given.includes(name(flag)))
}

/** One line on stderr when this process lacks the gateway's node flags (the server runs, only slower). */
export function noteMissingNodeFlags(): void {
  const missing = missingNodeFlags(process.execArgv, process.env.NODE_OPTIONS)
  if (missing.length === 0) return
  process.stderr.write(
    `note: node was started without ${missing.join(' ')}: the gateway runs, with more time in the garbage collector; start it as \`node ${missing.join(' ')} dist/cli/main.js …\` or set NODE_OPTIONS=${missing.join(' ')}\n`,
  )
}
