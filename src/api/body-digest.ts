import { hash } from 'node:crypto'

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 (hex) of the request body as received, before parsing: what the request's receipt states. */
    bodySha256: string | null
  }
}

/** SHA-256 (hex) of a body's text, as its UTF-8 bytes arrived (`hash`: no Hash object per request). */
export function bodyDigest(text: string): string {
  return hash('sha256', text, 'hex')
}
