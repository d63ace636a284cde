/**
 * A tokenizer as metering uses it: a text's token count, counted no further than past `stopAbove`. Metering version 1
 * is o200k's for every model; version 2 the model's own, named by the model (docs/architecture.md §7).
 */
export interface TokenCounter {
  /** `o200k`, or the vocabulary's file. */
  readonly name: string
  readonly meteringVersion: number
  count(text: string, stopAbove?: number): number
}
