import { pino, type Logger } from 'pino'

export type { Logger } from 'pino'

/** The longest a log line waits in the buffer. */
const FLUSH_MS = 1_000

export type LogFormat = 'json' | 'pretty'
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export interface LogOptions {
  level: LogLevel
  format: LogFormat
  /** Where lines go: stdout (1) for `svc serve`, stderr (2) where stdout is a command's own output. */
  fd?: 1 | 2
  /** Fields every line carries besides the process id (a worker's index). */
  base?: Record<string, unknown>
}

/**
 * The gateway's logger: one JSON object a line (pino), or readable lines when asked. Lines carry ids, codes, counts
 * and times; never a key, a cookie, a signature or message text.
 */
export async function createLogger({ level, format, fd = 1, base = {} }: LogOptions): Promise<Logger> {
  if (format === 'pretty') {
    const { default: pretty } = await import('pino-pretty')
    const logger = pino({ level }, pretty({ destination: fd, colorize: false, sync: true }))
    return Object.keys(base).length ? logger.child(base) : logger
  }
  // Written in blocks of 4 KiB (fewer system calls under load), and at least once a second; flushed on stop.
  const logger = pino(
    { level, base: { pid: process.pid, ...base } },
    pino.destination({ fd, sync: false, minLength: 4096 }),
  )
  setInterval(() => logger.flush(), FLUSH_MS).unref()
  return logger
}

/** A logger that writes nothing (tests, embedded use). */
export const silentLogger: Logger = pino({ level: 'silent' })
