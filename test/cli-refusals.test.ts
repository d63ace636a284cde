import { describe, expect, it } from 'vitest'
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, type AddressInfo } from 'node:net'
import { svc } from './helpers/cli.js'
import { addressOf } from './helpers/market.js'

describe('svc commands refuse bad input in one clear line', () => {
  it('refuses a bad config with one clear message per field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-bad-'))
    const file = join(dir, 'config.json')
    const model = {
      id: 'svc/x@1',
      owned_by: 'x',
      contextLimit: 4096,
      capabilities: {
        workload: 'chats',
        tools: false,
        structuredOutputs: false,
        reasoning: false,
        streaming: true,
        maxOutputTokens: 256,
      },
    }
    writeFileSync(
      file,
      JSON.stringify({
        store: 'mysql://x',
        rail: { kind: 'local' },
        feeBps: 20000,
        models: [model],
        providers: [{ address: 'nope' }],
      }),
    )
    const r = await svc(['serve', '--config', file])
    expect(r.code).toBe(1)
    // A field with a few allowed values names them.
    expect(r.stderr).toContain('models[0].capabilities.workload: must be one of "chat", "embedding"')
    expect(r.stderr).toContain('store:')
    expect(r.stderr).toContain('feeBps:')
    expect(r.stderr).toContain('providers[0]')
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/)
  })

  it('refuses a field the config does not have, such as a misspelt tuning, instead of applying its default', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-typo-'))
    const file = join(dir, 'config.json')
    const config = {
      $schema: './svc.schema.json',
      store: `sqlite:${join(dir, 'db')}`,
      rail: { kind: 'local', confirmations: 2 },
      feeBps: 0,
      models: [],
      providers: [],
      tuning: { firstByteTimoutMs: 100 },
      listen: { port: 0, hots: '0.0.0.0' },
    }
    writeFileSync(file, JSON.stringify(config))
    const r = await svc(['serve', '--config', file])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/tuning\.firstByteTimoutMs: Unexpected property/)
    expect(r.stderr).toMatch(/listen\.hots: Unexpected property/)
    // A rail is checked as the kind it names, so the message names the field.
    expect(r.stderr).toMatch(/rail\.confirmations: Unexpected property/)
    writeFileSync(file, JSON.stringify({ ...config, rail: { kind: 'lightning' }, tuning: {}, listen: {} }))
    expect((await svc(['serve', '--config', file])).stderr).toMatch(/rail\.kind: must be one of "local", "evm"/)
    expect(r.stderr).not.toContain('$schema')
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/)
  })

  // Nine processes started one after another, a few seconds each on a loaded machine: a longer timeout than the rest.
  it('explains in one line a bad environment, a store it cannot reach and a port in use', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-env-'))
    const file = join(dir, 'config.json')
    writeFileSync(
      file,
      JSON.stringify({
        store: `sqlite:${join(dir, 'db')}`,
        listen: { port: 0 },
        rail: { kind: 'local' },
        feeBps: 0,
        models: [],
        providers: [],
      }),
    )
    const notDb = join(dir, 'notes.txt')
    writeFileSync(notDb, 'these are not the tables you are looking for\n'.repeat(100))
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    try {
      for (const [env, why] of [
        [{ PORT: 'abc' }, /PORT: must be a port number from 0 to 65535, got abc/],
        [{ PORT: '99999' }, /PORT: must be a port number/],
        [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL: must start with sqlite: or postgres:\/\//],
        [{ DATABASE_URL: 'postgres://postgres@127.0.0.1:9/x' }, /error: connection refused: .*127\.0\.0\.1:9/],
        [
          { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/x?schema=Bad-Name' },
          /schema: Bad-Name is not a schema name/,
        ],
        [{ DATABASE_URL: `sqlite:${file}/db` }, /error: (not a directory|a file is in the way)/],
        [{ PORT: String((taken.address() as AddressInfo).port) }, /error: the address is in use/],
        [{ DATABASE_URL: `sqlite:${notDb}` }, /error: the store file is not a SQLite database/],
        [{ DATABASE_URL: `sqlite:${dir}` }, /error: the store file cannot be opened/],
      ] as const) {
        const r = await svc(['serve', '--config', file], env)
        expect(r.code, JSON.stringify(env)).toBe(1)
        expect(r.stderr, JSON.stringify(env)).toMatch(why)
        expect(r.stderr).not.toMatch(/at .*\.js:\d+/)
      }
    } finally {
      taken.close()
    }
  }, 90_000)

  it('explains in one line an address not of this machine and a store written by a newer svc', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-env-'))
    const file = join(dir, 'config.json')
    const config = {
      store: `sqlite:${join(dir, 'db')}`,
      listen: { host: '10.255.255.1', port: 0 },
      rail: { kind: 'local' },
      feeBps: 0,
      models: [],
      providers: [],
    }
    writeFileSync(file, JSON.stringify(config))
    const foreign = await svc(['serve', '--config', file])
    expect(foreign.code).toBe(1)
    expect(foreign.stderr).toMatch(/error: the address is not one of this machine's: .*10\.255\.255\.1/)
    expect(foreign.stderr).not.toMatch(/at .*\.js:\d+/)
    expect((await svc(['account', 'create', '--config', file, '--wallet', addressOf(0x51)])).code).toBe(0)
    const { default: Sqlite } = await import('better-sqlite3')
    const db = new Sqlite(join(dir, 'db'))
    db.prepare('INSERT INTO kysely_migration (name, timestamp) VALUES (?, ?)').run(
      '999_future',
      new Date().toISOString(),
    )
    db.close()
    for (const args of [['account', 'show', '--wallet', addressOf(0x51)], ['serve']]) {
      const r = await svc([...args, '--config', file])
      expect(r.code, args[0]).toBe(1)
      expect(r.stderr).toMatch(
        /^error: the store was written by a newer svc: it has migration 999_future, which this svc \(whose last is 0\d\d_\w+\) does not know; run the svc that wrote it$/m,
      )
      expect(r.stderr).not.toMatch(/at .*\.js:\d+/)
    }
  })

  it("serve says on stderr when node lacks the gateway's flags, and not when NODE_OPTIONS gives them", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-flags-'))
    const file = join(dir, 'config.json')
    writeFileSync(file, '{}')
    const bare = await svc(['serve', '--config', file])
    expect(bare.stderr).toContain('note: node was started without --max-semi-space-size=32')
    expect(bare.stderr).toContain('error: invalid config')
    const tuned = await svc(['serve', '--config', file], { NODE_OPTIONS: '--max-semi-space-size=32' })
    expect(tuned.stderr).not.toContain('note:')
    // The V8 settings a gateway gives itself are ones this node knows (else V8 names each on stderr).
    expect(bare.stderr + tuned.stderr).not.toMatch(/unrecognized flag|bad option/i)
    expect(tuned.stderr).toContain('error: invalid config')
  })

  it("refuses the simulated provider's bad options with one line each", async () => {
    for (const [args, why] of [
      [['--port', 'abc'], /--port must be a port number, got abc/],
      [['--port', '99999'], /--port must be a port number/],
      [['--host', '999.1.1.1'], /cannot listen on 999\.1\.1\.1/],
      [['--reply-tokens', '-3'], /--reply-tokens must be a whole number/],
      [['--chunk-delay-ms', 'abc'], /--chunk-delay-ms must be a whole number/],
      [['--models', '[1,2]'], /--models must be a JSON object/],
      [['--models', '{bad'], /--models is not JSON/],
      [['--models', '{"tern":{"paralel":false}}'], /--models: tern has no field paralel \(fields: toolChoice, /],
      [
        ['--models', '{"tern":{"toolChoice":5}}'],
        /--models: tern\.toolChoice must be an array of "auto", "none", "required", "named", got 5/,
      ],
      [['--models', '{"tern":{"parallel":"no"}}'], /--models: tern\.parallel must be true or false, got "no"/],
      [['--models', '{"tern":{"latencyMs":-1}}'], /--models: tern\.latencyMs must be a whole number of ms, got -1/],
    ] as const) {
      const r = await svc(['sim-provider', ...args])
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr).toMatch(why)
      expect(r.stderr).not.toMatch(/at .*\.js:\d+/)
    }
  })

  it('answers a usage mistake with one line and the help of the command at fault', async () => {
    for (const [args, why, hint] of [
      [['account', 'show'], /required option '--wallet <address>' not specified/, 'svc account show --help'],
      [['demo', '--prot', '8081'], /unknown option '--prot'/, 'svc demo --help'],
      [['certify', '--model', 'm'], /required option '--base-url <url>' not specified/, 'svc certify --help'],
      [['bogus'], /unknown command 'bogus'/, 'svc --help'],
    ] as const) {
      const r = await svc([...args])
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr).toMatch(why)
      expect(r.stderr.trim().split('\n').at(-1)).toBe(
        `(run ${hint} for ${hint === 'svc --help' ? 'the commands' : 'its options'})`,
      )
    }
  })

  // About fifteen processes of the CLI, a second each here, more on a busy machine.
  it('explains a bad amount and an unknown wallet', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-bad-'))
    const file = join(dir, 'config.json')
    writeFileSync(
      file,
      JSON.stringify({
        store: `sqlite:${join(dir, 'db')}`,
        rail: { kind: 'local' },
        feeBps: 0,
        models: [],
        providers: [],
      }),
    )
    const bad = await svc(['deposit', '--wallet', addressOf(1), '--amount', '1.0000001', '--config', file])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/at most 6 decimals/)
    const unknown = await svc(['account', 'show', '--wallet', addressOf(2), '--config', file])
    expect(unknown.stderr).toMatch(/no account for/)
    // A store path with a typo is no new, empty store: the commands that only read or change accounts say so.
    for (const args of [
      ['account', 'show', '--wallet', addressOf(2)],
      ['usage', '--wallet', addressOf(2)],
      ['key', 'list', '--wallet', addressOf(2)],
    ]) {
      const r = await svc([...args, '--config', file], { DATABASE_URL: `sqlite:${join(dir, 'typo', 'db')}` })
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr, args.join(' ')).toMatch(
        /^error: no store at .*typo\/db \(the config's store, or DATABASE_URL\): check the path/,
      )
    }
    expect(existsSync(join(dir, 'typo'))).toBe(false)
    // Amounts past what the store's 64-bit integers hold are refused in words, and nothing is written.
    const huge = await svc(['deposit', '--wallet', addressOf(1), '--amount', '9'.repeat(30), '--config', file])
    expect(huge.code).toBe(1)
    expect(huge.stderr).toMatch(/at most 1000000000\.000000 USDC/)
    expect(huge.stderr).not.toMatch(/at .*\.js:\d+/)
    await svc(['deposit', '--wallet', addressOf(1), '--amount', '999999999', '--config', file])
    const over = await svc(['deposit', '--wallet', addressOf(1), '--amount', '2', '--config', file])
    expect(over.stderr).toMatch(/balance would exceed/)
    const cap = await svc(['approve', '--wallet', addressOf(1), '--amount', '1' + '0'.repeat(10), '--config', file])
    expect(cap.stderr).toMatch(/a cap must be between/)
    const shown = JSON.parse(
      (await svc(['account', 'show', '--wallet', addressOf(1), '--config', file, '--json'])).stdout,
    )
    expect(shown.balance).toBe('999999999.000000')
    // Key names follow the portal's rule: printable, 1 to 64 characters.
    for (const name of ['', 'a'.repeat(65), 'a\u0001b', 'a\u202eb']) {
      const key = await svc(['key', 'create', '--wallet', addressOf(1), '--name', name, '--config', file])
      expect(key.code, name).toBe(1)
      expect(key.stderr).toMatch(/name must be 1 to 64 printable characters/)
    }
    expect(
      JSON.parse((await svc(['key', 'list', '--wallet', addressOf(1), '--config', file, '--json'])).stdout).keys,
    ).toEqual([])
    for (const limit of ['1e2', '0x10', '0', '10001']) {
      const usage = await svc(['usage', '--wallet', addressOf(1), '--limit', limit, '--config', file])
      expect(usage.code, limit).toBe(1)
      expect(usage.stderr).toMatch(/--limit must be a whole number from 1 to 10000/)
    }
  }, 90_000)
})
