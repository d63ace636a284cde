import { Redis } from 'ioredis'
import type { RateLimits } from './limits.js'
import type { RateAnswer, RateCount, RateCounter } from './counter.js'

/**
 * A limited key's counts of one minute: a hash of requests (`r`) and tokens (`t`), gone two minutes after. The tokens
 * are counted from the argument as sent (Lua would write a large number back in exponent form, which HINCRBY refuses).
 */
const TAKE = `
local r = tonumber(redis.call('HGET', KEYS[1], 'r') or '0')
local t = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local rpm, tpm, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if (rpm >= 0 and r + 1 > rpm) or (tpm >= 0 and t + n > tpm) then return {0, r, t} end
r = redis.call('HINCRBY', KEYS[1], 'r', 1)
t = redis.call('HINCRBY', KEYS[1], 't', ARGV[3])
redis.call('PEXPIRE', KEYS[1], 120000)
return {1, r, t}`

const CORRECT = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBY', KEYS[1], 't', ARGV[1]) end
return 0`

/** How long a command may take before the limits are taken as unreachable (`limits.onRedisDown`). */
const COMMAND_TIMEOUT_MS = 250

type Scripted = Redis & {
  svcTake(key: string, rpm: number, tpm: number, tokens: number): Promise<[number, number, number]>
  svcCorrect(key: string, delta: number): Promise<number>
}

/** The rate counter of gateways that share a Redis: one Lua script checks and counts, atomically across processes. */
export class RedisRates implements RateCounter {
  private readonly redis: Scripted

  /** `url`: `redis://host:port[/db]`. Commands fail at once while Redis is unreachable (nothing queues). */
  constructor(url: string) {
    const redis = new Redis(url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      // Commands of one turn of the event loop go out in one write.
      enableAutoPipelining: true,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: (times) => Math.min(times * 200, 2_000),
    })
    // Its errors are the commands' to report; an unhandled 'error' event would end the process.
    redis.on('error', () => {})
    redis.defineCommand('svcTake', { numberOfKeys: 1, lua: TAKE })
    redis.defineCommand('svcCorrect', { numberOfKeys: 1, lua: CORRECT })
    this.redis = redis as Scripted
  }

  async take(keyId: string, minute: number, limits: RateLimits, tokens: number): Promise<RateAnswer> {
    const [taken, requests, counted] = await this.redis.svcTake(
      keyOf(keyId, minute),
      limits.rpm ?? -1,
      limits.tpm ?? -1,
      tokens,
    )
    return { taken: taken === 1, count: { requests, tokens: counted } }
  }

  async peek(keyId: string, minute: number): Promise<RateCount> {
    const [r, t] = await this.redis.hmget(keyOf(keyId, minute), 'r', 't')
    return { requests: Number(r ?? 0), tokens: Number(t ?? 0) }
  }

  async correct(keyId: string, minute: number, delta: number): Promise<void> {
    await this.redis.svcCorrect(keyOf(keyId, minute), delta)
  }

  async close(): Promise<void> {
    this.redis.disconnect()
  }
}

const keyOf = (keyId: string, minute: number) => `svc:rate:${keyId}:${minute}`
