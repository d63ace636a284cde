import { createHash } from 'node:crypto'

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 (hex) of the request body as received, before parsing: what the request's receipt states. */
    bodySha256: string | null
  }
}

/** SHA-256 (hex) of a body's text, as its UTF-8 bytes arrived. */
export function bodyDigest(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}
