// node-llama-cpp, loaded only where a provider serves a model file with it: the product never depends on it (it is
// installed in engines/, or beside the product by an operator who serves). What of its API the engine uses, typed here.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

export interface ChatHistoryItem {
  type: 'system' | 'user' | 'model'
  text?: string
  response?: string[]
}

export interface PromptMeta {
  responseText: string
  stopReason: 'abort' | 'maxTokens' | 'eogToken' | 'stopGenerationTrigger' | 'functionCalls' | 'customStopTrigger'
}

export interface ChatSession {
  setChatHistory(history: ChatHistoryItem[]): void
  promptWithMeta(
    prompt: string,
    options: {
      maxTokens?: number
      temperature?: number
      seed?: number
      signal?: AbortSignal
      stopOnAbortSignal?: boolean
      onTextChunk?: (text: string) => void
    },
  ): Promise<PromptMeta>
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

export interface NodeLlamaCpp {
  getLlama(options: { gpu: false; build: 'never'; logLevel?: string }): Promise<{
    loadModel(options: { modelPath: string }): Promise<LlamaModel>
    dispose(): Promise<void>
  }>
  LlamaChatSession: new (options: { contextSequence: ContextSequence; autoDisposeSequence?: boolean }) => ChatSession
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
