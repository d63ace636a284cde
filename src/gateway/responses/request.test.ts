import { describe, expect, it } from 'vitest'
import { chatFormat, chatToolChoice, chatTools, responsesParam } from './request.js'
import { chatMessages } from './items.js'

describe('a Responses request read as a chat request', () => {
  it('names the Responses field of a chat refusal', () => {
    const origins = ['instructions', 'input[0]', 'previous_response_id']
    expect(responsesParam('messages[1].content', origins)).toBe('input[0]')
    expect(responsesParam('messages[2]', origins)).toBe('previous_response_id')
    expect(responsesParam('messages', origins)).toBe('input')
    expect(responsesParam('max_tokens', origins)).toBe('max_output_tokens')
    expect(responsesParam('response_format', origins)).toBe('text.format')
    expect(responsesParam('response_format.json_schema.schema', origins)).toBe('text.format.schema')
    expect(responsesParam('tools[3].function.parameters', origins)).toBe('tools[3].parameters')
    expect(responsesParam('tool_choice.function.name', origins)).toBe('tool_choice.name')
    expect(responsesParam('parallel_tool_calls', origins)).toBe('parallel_tool_calls')
  })

  it('tools, tool_choice and text.format in the chat shape; anything else refused by name', () => {
    expect(chatTools([{ type: 'function', name: 'f', parameters: { type: 'object' } }])).toEqual([
      { type: 'function', function: { name: 'f', parameters: { type: 'object' } } },
    ])
    expect(chatTools([{ type: 'function', name: 'f' }, { type: 'file_search' }])).toMatchObject({
      code: 'feature_not_supported',
      param: 'tools[1].type',
    })
    expect(chatToolChoice({ type: 'function', name: 'f' })).toEqual({ type: 'function', function: { name: 'f' } })
    expect(chatToolChoice('required')).toBe('required')
    expect(chatToolChoice({ type: 'web_search_preview' })).toMatchObject({ param: 'tool_choice' })
    expect(chatFormat({ type: 'json_schema', name: 'n', schema: {}, strict: true })).toEqual({
      type: 'json_schema',
      json_schema: { name: 'n', schema: {}, strict: true },
    })
    expect(chatFormat({ type: 'grammar' })).toMatchObject({ param: 'text.format.type' })
  })

  it('a function call joins the assistant message before it; an output is a tool message', () => {
    const call = (id: string) => ({ type: 'function_call' as const, call_id: id, name: 'f', arguments: '{}' })
    const { messages, origins } = chatMessages([
      { item: { type: 'message', role: 'user', content: 'q' }, origin: 'input[0]' },
      { item: { type: 'message', role: 'assistant', content: 'let me see' }, origin: 'input[1]' },
      { item: call('a'), origin: 'input[2]' },
      { item: call('b'), origin: 'input[3]' },
      { item: { type: 'function_call_output', call_id: 'a', output: '1' }, origin: 'input[4]' },
      { item: { type: 'function_call_output', call_id: 'b', output: '2' }, origin: 'input[5]' },
      { item: call('c'), origin: 'input[6]' },
      { item: { type: 'message', role: 'assistant', content: 'done' }, origin: 'input[7]' },
    ])
    const fn = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } })
    expect(messages).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'let me see', tool_calls: [fn('a'), fn('b')] },
      { role: 'tool', tool_call_id: 'a', content: '1' },
      { role: 'tool', tool_call_id: 'b', content: '2' },
      { role: 'assistant', content: null, tool_calls: [fn('c')] },
      { role: 'assistant', content: 'done' },
    ])
    expect(origins).toEqual(['input[0]', 'input[1]', 'input[4]', 'input[5]', 'input[6]', 'input[7]'])
  })
})
