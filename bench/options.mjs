// The bench scripts' command lines: node's parseArgs, plus `--help` (the script's header comment, which says what it
// measures and how to call it) and one clear line instead of a stack trace for an unknown option or a number that
// is not one. An option whose default is a number, or a list of numbers, must be given as one; an option with
// `choices` takes one of them (with `list: true`, a comma-separated list of them).
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

const NUMBERS = /^\d+(\.\d+)?(,\d+(\.\d+)?)*$/

/** The node flags of a bench's `--node-args` option (space-separated; none when it is empty). */
export const nodeArgsOf = (values) => values['node-args'].split(' ').filter(Boolean)

/** Parses `process.argv` for the script at `scriptUrl` (its `import.meta.url`); exits on --help or a wrong option. */
export function benchOptions(scriptUrl, options) {
  let values
  try {
    values = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h', default: false } } }).values
  } catch (err) {
    usageError(scriptUrl, err.message)
  }
  if (values.help) {
    console.log(header(scriptUrl))
    process.exit(0)
  }
  for (const [name, spec] of Object.entries(options)) {
    const value = values[name]
    if (typeof spec.default === 'string' && NUMBERS.test(spec.default) && !NUMBERS.test(value)) {
      usageError(
        scriptUrl,
        `--${name} takes a number${spec.default.includes(',') ? ' or a comma-separated list of numbers' : ''}, not '${value}'`,
      )
    }
    if (
      spec.choices &&
      value !== undefined &&
      !(spec.list ? value.split(',') : [value]).every((v) => spec.choices.includes(v))
    ) {
      usageError(
        scriptUrl,
        `--${name} takes ${spec.list ? 'a comma-separated list of ' : 'one of '}${spec.choices.join(', ')}, not '${value}'`,
      )
    }
  }
  delete values.help
  return values
}

/** The leading `//` comment of a script, without its comment marks. */
function header(scriptUrl) {
  const lines = []
  for (const line of readFileSync(new URL(scriptUrl), 'utf8').split('\n')) {
    if (!line.startsWith('//')) break
    lines.push(line.replace(/^\/\/ ?/, ''))
  }
  return lines.join('\n')
}

/** Ends the script with `message` and its usage line, exit code 2. */
export function usageError(scriptUrl, message) {
  const text = header(scriptUrl)
  const at = text.indexOf('Usage:')
  console.error(`${message}\n${at >= 0 ? `${text.slice(at)}\n` : ''}(--help says more)`)
  process.exit(2)
}
