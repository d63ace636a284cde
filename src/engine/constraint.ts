// What the engine lets the model generate for a request: free text, or text a grammar holds to (JSON of one schema,
// the arguments of the tool the client named, a call of one of the tools), or text and calls the model chooses between
// as its chat template taught it. Grammars are what make tool_choice and response_format promises the engine keeps,
// whatever the model would have said.
import { BadRequest, type ChatBody } from './chat-body.js'
import type { ChatFunctions, Grammar, Llama } from './node-llama.js'

export type Constraint =
  /** Text, as the model says it. */
  | { kind: 'text' }
  /** JSON, of the schema asked for or of any shape. */
  | { kind: 'json'; grammar: Grammar }
  /** The arguments of the named tool: its call is the reply. */
  | { kind: 'arguments'; name: string; grammar: Grammar }
  /** `{"name": …, "arguments": …}` of one of the tools: that call is the reply. */
  | { kind: 'call'; grammar: Grammar }
  /** Text, or calls of the tools when the model begins one. */
  | { kind: 'functions'; functions: ChatFunctions }

/** A tool's parameters as a schema; a tool that declares none takes an object of any shape. */
const paramsSchema = (params: unknown) => params ?? { type: 'object' }

async function grammarOf(llama: Llama, schema: unknown, what: string): Promise<Grammar> {
  try {
    return await llama.createGrammarForJsonSchema(schema)
  } catch (err) {
    throw new BadRequest(`this engine cannot hold ${what} to its schema: ${(err as Error).message}`)
  }
}

/**
 * The constraint of `body`. Tools come first: with tool_choice auto the model chooses, and response_format holds only
 * where no tool can be called. BadRequest for a schema the engine cannot turn into a grammar.
 */
export async function constraintOf(llama: Llama, body: ChatBody): Promise<Constraint> {
  const { tools, toolChoice } = body
  if (tools && toolChoice !== 'none') {
    if (typeof toolChoice === 'object')
      return {
        kind: 'arguments',
        name: toolChoice.name,
        grammar: await grammarOf(llama, paramsSchema(tools[toolChoice.name]!.params), `${toolChoice.name}'s arguments`),
      }
    const names = Object.keys(tools)
    if (toolChoice === 'required' && names.length === 1)
      return {
        kind: 'arguments',
        name: names[0]!,
        grammar: await grammarOf(llama, paramsSchema(tools[names[0]!]!.params), `${names[0]}'s arguments`),
      }
    if (toolChoice === 'required') {
      const calls = names.map((name) => ({
        type: 'object',
        properties: { name: { const: name }, arguments: paramsSchema(tools[name]!.params) },
        required: ['name', 'arguments'],
        additionalProperties: false,
      }))
      return { kind: 'call', grammar: await grammarOf(llama, { oneOf: calls }, 'the tool call') }
    }
    return { kind: 'functions', functions: tools }
  }
  if (body.format?.type === 'json') return { kind: 'json', grammar: await llama.getGrammarFor('json') }
  if (body.format?.type === 'schema')
    return { kind: 'json', grammar: await grammarOf(llama, body.format.schema, 'the reply') }
  return { kind: 'text' }
}
