import { connect } from 'node:net'
import { expect } from 'vitest'

/**
 * Expects an error of the contract (docs/interface.md): the status, code and param, a request id, JSON with a message
 * that says something, and no stack trace; the error object.
 */
export async function expectError(res: Response, status: number, code: string, param: string | null) {
  const text = await res.text()
  expect(res.status, text).toBe(status)
  expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  expect(res.headers.get('content-type')).toMatch(/application\/json/)
  const body = JSON.parse(text)
  expect(body.error).toMatchObject({ code, param })
  expect(typeof body.error.message).toBe('string')
  expect(body.error.message.length).toBeGreaterThan(10)
  expect(text).not.toMatch(/at .*\.(ts|js):\d+/)
  return body.error as { message: string; type: string; code: string; param: string | null }
}

/** Sends raw bytes and reads what comes back until the server closes the connection. */
export function raw(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    let out = ''
    const socket = connect(Number(port), hostname, () => socket.write(bytes))
    socket
      .setEncoding('utf8')
      .on('data', (d: string) => (out += d))
      .on('close', () => resolve(out))
      .on('error', reject)
  })
}
