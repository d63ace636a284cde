// node-llama-cpp, loaded only where a provider serves a model file with it: the product never depends on it (it is
// installed in engines/, or beside the product by an operator who serves). What of its API the engine uses, typed here.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

/** A call the model made earlier in the conversation, with what the tool answered. */
export interface FunctionCallItem {
  type: 'functionCall'
  name: string
  params: unknown
  result: unknown
}

export type ChatHistoryItem =
  | { type: 'system'; text: string }
  | { type: 'user'; text: string }
  | { type: 'model'; response: (string | FunctionCallItem)[] }

/** Functions the model may call, each with its parameters' JSON schema. */
export type ChatFunctions = Record<string, { description?: string; params?: unknown }>

export interface ChatFunctionCall {
  functionName: string
  params: unknown
}

/** A grammar that constrains what is generated (from a JSON schema, or JSON of any shape). */
export type Grammar = object

export interface GenerateOptions {
  maxTokens?: number
  temperature?: number
  seed?: number
  signal?: AbortSignal
  stopOnAbortSignal?: boolean
  onTextChunk?: (text: string) => void
  grammar?: Grammar
  functions?: ChatFunctions
  onFunctionCallParamsChunk?: (chunk: { callIndex: number; functionName: string; paramsChunk: string }) => void
}

export interface ChatResponse {
  response: string
  functionCalls?: ChatFunctionCall[]
  metadata: { stopReason: 'abort' | 'maxTokens' | 'eogToken' | 'stopGenerationTrigger' | 'functionCalls' | string }
}

export interface Chat {
  generateResponse(history: ChatHistoryItem[], options: GenerateOptions): Promise<ChatResponse>
  dispose(options?: { disposeSequence?: boolean }): void
}

export interface ContextSequence {
  readonly tokenMeter: { readonly usedInputTokens: number; readonly usedOutputTokens: number }
  dispose(): void
}

export interface LlamaContext {
  getSequence(): ContextSequence
  dispose(): Promise<void>
}

export interface LlamaModel {
  tokenize(text: string, specialTokens?: boolean): number[]
  createContext(options: { contextSize?: number; sequences?: number; threads?: number }): Promise<LlamaContext>
  dispose(): Promise<void>
}

export interface Llama {
  loadModel(options: { modelPath: string }): Promise<LlamaModel>
  /** Throws for a schema outside the subset it can turn into a grammar. */
  createGrammarForJsonSchema(schema: unknown): Promise<Grammar>
  getGrammarFor(type: 'json'): Promise<Grammar>
  dispose(): Promise<void>
}

export interface NodeLlamaCpp {
  getLlama(options: { gpu: false; build: 'never'; logLevel?: string }): Promise<Llama>
  LlamaChat: new (options: { contextSequence: ContextSequence; autoDisposeSequence?: boolean }) => Chat
}

export class EngineMissing extends Error {}

/** The project's engines/ folder, where the engine tests install node-llama-cpp. */
export const ENGINES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'engines')

/** Where node-llama-cpp is installed for the engine tests, if it is. */
export const ENGINE_ENTRY = join(ENGINES_DIR, 'node_modules', 'node-llama-cpp', 'dist', 'index.js')

/** node-llama-cpp from beside the product, or else from engines/; EngineMissing when neither has it. */
export async function loadNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  try {
    return (await import('node-llama-cpp' as string)) as NodeLlamaCpp
  } catch {
    if (!existsSync(ENGINE_ENTRY))
      throw new EngineMissing(
        'node-llama-cpp is not installed: npm ci in engines/ (or npm install node-llama-cpp@3.21.1 beside the product)',
      )
    return (await import(pathToFileURL(ENGINE_ENTRY).href)) as NodeLlamaCpp
  }
}
