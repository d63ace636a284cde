/** The shapes of an account's usage figures, as the repository and the dialects read them. */

/** An account's usage totals over its whole history, and its spend per day since a day. */
export interface UsageSummary {
  totals: UsageTotals
  /** Days without requests are absent; oldest first. */
  daily: DailySpend[]
}

export interface UsageFilter {
  keyId?: string
  model?: string
  since?: number
}

export interface UsageTotals {
  requests: number
  promptTokens: number
  completionTokens: number
  cost: bigint
}

/** Spend of one UTC day; `day` is the day's start in epoch milliseconds. */
export interface DailySpend {
  day: number
  requests: number
  cost: bigint
}
