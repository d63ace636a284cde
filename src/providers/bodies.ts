import { StringDecoder } from 'node:string_decoder'
import type { Dispatcher } from 'undici'
import { ReplyTooLarge } from './plain-exchange.js'

/** Reading an upstream's reply body through undici's stream, within a bound. */

/** A whole 200 body, refused with `ReplyTooLarge` past `limit` bytes. */
export async function readWhole(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) throw new ReplyTooLarge(limit)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size).toString('utf8')
}

/** The start of a refusal's body: reading stops past `limit` characters. */
export async function readBounded(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  // undici's body ignores setEncoding: it yields bytes, and a character may be cut between two reads.
  const utf8 = new StringDecoder('utf8')
  let text = ''
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      text += utf8.write(chunk)
      if (text.length > limit) break
    }
  } catch {
    // The status already says what matters.
  }
  return text
}
