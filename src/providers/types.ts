import type { Cancel } from './cancel.js'
import type { FinishReason } from '../protocol/chat.js'

/**
 * Why an attempt at an upstream failed. Decided where the failure happens:
 * `unavailable` (refused, reset, 5xx/429, timeout) and `invalid_output` (unparsable or refused output)
 * both let the gateway try the next offer while nothing reached the client; `aborted` means our own client left.
 */
export interface Failure {
  kind: 'unavailable' | 'invalid_output' | 'aborted'
  detail: string
  status?: number
  /** No connection could be made to the upstream: it is gone, not busy. */
  unreached?: boolean
}

/**
 * Upstream output parsed once into typed events (docs/architecture.md §2). A broken upstream is an event, not an
 * exception.
 */
export type UpstreamEvent =
  /**
   * `logprobs`: the entries of the choice's `logprobs.content` that came with this text, when the upstream sent them.
   */
  | { type: 'content'; text: string; logprobs?: readonly unknown[] }
  /** The model's reasoning before (or between) its content: `reasoning_content` or `reasoning`, by engine. */
  | { type: 'reasoning'; text: string }
  /** `index` is absent when the upstream omitted it. */
  | { type: 'tool_delta'; index?: number; id?: string; name?: string; arguments?: string }
  | { type: 'finish'; reason: FinishReason }
  | { type: 'usage'; promptTokens: number; completionTokens: number }
  | { type: 'failure'; failure: Failure }

export interface UpstreamRequest {
  /** The request body as JSON, without `model`, `stream`, `stream_options` and `max_tokens`, which the adapter sets. */
  bodyJson: string
  stream: boolean
  /**
   * Sent as `max_tokens` (absent: the body's own, if any). Outside the body so that targets with different bounds
   * share one serialized body.
   */
  maxTokens?: number
}

/** What an embeddings attempt sends: the inputs, and the vector length when a shorter one is asked. */
export interface EmbedRequest {
  inputs: readonly (string | number[])[]
  dimensions?: number
}

/** An embeddings attempt's end: one vector per input in order (and the upstream's own count), or why not. */
export type Embedded =
  { kind: 'embedded'; vectors: number[][]; promptTokens: number | null } | { kind: 'failed'; failure: Failure }

/** One Provider interface, many configurations: an OpenAI-compatible upstream is data, not code. */
export interface Provider {
  /**
   * Sends the request; yields events until the upstream finishes or fails, those of one upstream read together
   * (one generator step per read, not per event); a batch is never empty. A failure is the last event. Never throws
   * for upstream faults.
   */
  stream(upstreamModel: string, request: UpstreamRequest, cancel: Cancel): AsyncIterable<readonly UpstreamEvent[]>
  /** Embeds the inputs (`POST /embeddings`); never throws for upstream faults. Absent: it serves no embeddings. */
  embed?(upstreamModel: string, request: EmbedRequest, cancel: Cancel): Promise<Embedded>
  close(): Promise<void>
}
