const MINUTE_MS = 60_000
const DAY_MINUTES = 1_440

/**
 * How far a provider's count of a reply's output tokens may exceed the gateway's before it is over-reported: an engine
 * counts the end-of-turn token it generated (and, under a grammar, may spell a token the text re-tokenizes into fewer),
 * so a couple of tokens, or 5 % of a long reply, are not evidence.
 */
export const USAGE_SLACK_TOKENS = 2
export const USAGE_SLACK_SHARE = 0.05

/** What one delivered reply showed of its offer's honesty, checked against the gateway's own count. */
export interface CheckedReply {
  /** The output tokens the provider reported; undefined when it reported none. */
  reported: number | undefined
  /** The output tokens the gateway counted in the model's tokenizer (before the max_tokens bound). */
  counted: number
  /** Whether the two counts are in one tokenizer (its model names its own) and the reply has no tool call. */
  comparable: boolean
  finish: string
  /** The max_tokens the offer was sent. */
  maxTokens: number
}

interface Minute {
  /** Replies whose usage was compared, those over-reported, and the sums of both counts over them. */
  usage: number
  over: number
  reported: number
  counted: number
  /** Replies whose finish reason was checked, and those whose reason their length contradicts. */
  finish: number
  finishWrong: number
  /** Replies the gateway refused to deliver: tool calls against their contract, output it could not read. */
  refused: number
}

/** Whether a reported count exceeds the gateway's past the slack. */
export function overReported(reported: number, counted: number): boolean {
  return reported - counted > Math.max(USAGE_SLACK_TOKENS, Math.ceil(counted * USAGE_SLACK_SHARE))
}

/**
 * Whether a reply's finish reason contradicts its length: `length` with room left under max_tokens (the generation was
 * cut and called full), or `stop` past it (the bound was ignored).
 */
export function finishContradicted(r: Pick<CheckedReply, 'finish' | 'counted' | 'maxTokens'>): boolean {
  if (r.finish === 'length') return r.counted + USAGE_SLACK_TOKENS < r.maxTokens
  if (r.finish === 'stop') return r.counted > r.maxTokens
  return false
}

/** The last day's checks of one offer, as GET /v1/models/{id}/endpoints shows them. */
export interface ChecksSummary {
  usage_checked: number
  usage_over_reported: number
  /** (reported − counted) / counted over the compared replies; null with none. */
  usage_drift: number | null
  finish_checked: number
  finish_contradicted: number
  /** Replies refused as invalid (`provider_output_invalid`): tool calls against the contract, unreadable output. */
  output_refused: number
}

/**
 * Checks of an offer's real traffic at no extra request (docs/architecture.md §11a): each delivered reply's reported
 * usage against the gateway's count, and its finish reason against its length and max_tokens, counted by minute over
 * the last day in this process.
 */
export class OfferChecks {
  private readonly series = new Map<string, Map<number, Minute>>()

  constructor(private readonly now: () => number = Date.now) {}

  record(key: string, r: CheckedReply): void {
    const m = this.minute(key)
    if (r.comparable && r.reported !== undefined) {
      m.usage++
      m.reported += r.reported
      m.counted += r.counted
      if (overReported(r.reported, r.counted)) m.over++
    }
    m.finish++
    if (finishContradicted(r)) m.finishWrong++
  }

  /** A reply of the offer refused as invalid output. */
  refused(key: string): void {
    this.minute(key).refused++
  }

  /** The offer's counts of the current minute (the day's older minutes dropped). */
  private minute(key: string): Minute {
    const minute = Math.floor(this.now() / MINUTE_MS)
    let minutes = this.series.get(key)
    if (!minutes) this.series.set(key, (minutes = new Map()))
    let m = minutes.get(minute)
    if (!m) {
      minutes.set(minute, (m = emptyMinute()))
      if (minutes.size > DAY_MINUTES + 1)
        for (const k of minutes.keys()) if (k <= minute - DAY_MINUTES) minutes.delete(k)
    }
    return m
  }

  summary(key: string): ChecksSummary {
    const from = Math.floor(this.now() / MINUTE_MS) - DAY_MINUTES
    const sum = emptyMinute()
    for (const [minute, m] of this.series.get(key) ?? []) {
      if (minute <= from) continue
      for (const k of Object.keys(sum) as (keyof Minute)[]) sum[k] += m[k]
    }
    return {
      usage_checked: sum.usage,
      usage_over_reported: sum.over,
      usage_drift: sum.counted > 0 ? Number(((sum.reported - sum.counted) / sum.counted).toFixed(4)) : null,
      finish_checked: sum.finish,
      finish_contradicted: sum.finishWrong,
      output_refused: sum.refused,
    }
  }
}

const emptyMinute = (): Minute => ({
  usage: 0,
  over: 0,
  reported: 0,
  counted: 0,
  finish: 0,
  finishWrong: 0,
  refused: 0,
})
