import { randomFillSync } from 'node:crypto'

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
const POOL_SIZE = 4096
const pool = new Uint8Array(POOL_SIZE)
let offset = POOL_SIZE

function randomByte(): number {
  if (offset >= POOL_SIZE) {
    randomFillSync(pool)
    offset = 0
  }
  return pool[offset++]!
}

/** A ULID: 10 characters of time (ms) then 16 random, sortable by creation. */
export function ulid(now = Date.now()): string {
  let time = ''
  let t = now
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32]! + time
    t = Math.floor(t / 32)
  }
  let rand = ''
  for (let i = 0; i < 16; i++) rand += CROCKFORD[randomByte() & 31]
  return time + rand
}

/** `req_<ulid>`: the x-request-id header, svc.request_id and the usage record's key. */
export function newRequestId(): string {
  return `req_${ulid()}`
}

/** The completion id that shares the request's ULID. */
export function completionId(requestId: string): string {
  return `chatcmpl-${requestId.slice(4)}`
}
