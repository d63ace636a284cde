import { IdentifierNode, OperationNodeTransformer, type Kysely, type KyselyPlugin } from 'kysely'
import type BetterSqlite3 from 'better-sqlite3'
import { openSqlite } from '../../src/store/sqlite/open.js'
import { migrate } from '../../src/store/migrate.js'
import { AccountRepo, SYSTEM_ACCOUNTS } from '../../src/store/accounts.js'

/**
 * A SQLite store migrated only as far as `through`, as an older version left it: its accounts, and the raw
 * connection to write what that version's ledger wrote (the hot ledger of today's code needs today's schema).
 */
export async function olderSqliteStore(url: string, through: string) {
  const h = openSqlite(url)
  await migrate(h.db as unknown as Kysely<unknown>, 'sqlite', through)
  // Before 010 the postings were all rows of a table named `postings`, where today's code writes `posting_rows`.
  const accounts = new AccountRepo(h.db.withPlugin(new PostingsAsTheyWere()))
  for (const address of Object.values(SYSTEM_ACCOUNTS)) await accounts.ensure(address, 'system', 1000)
  return {
    accounts,
    raw: h.raw,
    close: async () => {
      await h.db.destroy()
      await h.close()
    },
  }
}

/** What the ledger before migration 009 wrote for requests: an open hold is a row, usage its own table. */
export function legacyLedger(raw: BetterSqlite3.Database, accountId: number, now: number) {
  const pair = raw.prepare(
    `INSERT INTO postings (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, 'held', ?, ?, ?), (?, ?, 'available', ?, ?, ?)`,
  )
  const post = raw.prepare(
    `INSERT INTO postings (ref, account_id, book, kind, amount, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
  )
  const usage = (requestId: string, cost: bigint, outcome: string) =>
    raw
      .prepare(
        `INSERT INTO usage (request_id, account_id, key_id, model, served_model, provider, stream, prompt_tokens, completion_tokens,
      upstream_prompt_tokens, upstream_completion_tokens, cost, outcome, latency_ms, created_at)
      VALUES (?, ?, 'key_1', 'svc/atlas@1', 'svc/atlas@1', '0xabc', 0, 10, 5, NULL, NULL, ?, ?, 3, ?)`,
      )
      .run(requestId, accountId, cost, outcome, now)
  return {
    hold(requestId: string, amount: bigint, owner: string) {
      raw.prepare('UPDATE accounts SET held = held + ? WHERE id = ?').run(amount, accountId)
      raw
        .prepare(
          `INSERT INTO holds (request_id, account_id, key_id, model, amount, status, owner, created_at, expires_at)
        VALUES (?, ?, 'key_1', 'svc/atlas@1', ?, 'open', ?, ?, ?)`,
        )
        .run(requestId, accountId, amount, owner, now, now + 60_000)
      pair.run(requestId, accountId, 'hold', amount, now, requestId, accountId, 'hold', -amount, now)
    },
    capture(requestId: string, amount: bigint, cost: bigint, payee: number) {
      raw
        .prepare(
          `UPDATE holds SET status = 'captured', cost = ?, payee_id = ?, fee = 0, closed_at = ? WHERE request_id = ?`,
        )
        .run(cost, payee, now + 1, requestId)
      raw
        .prepare('UPDATE accounts SET balance = balance - ?, held = held - ?, cap = cap - ? WHERE id = ?')
        .run(cost, amount, cost, accountId)
      pair.run(
        requestId,
        accountId,
        'release',
        cost - amount,
        now + 1,
        requestId,
        accountId,
        'release',
        amount - cost,
        now + 1,
      )
      post.run(requestId, accountId, 'held', 'capture', -cost, now + 1)
      post.run(requestId, payee, 'pending', 'payout', cost, now + 1)
      usage(requestId, cost, 'completed')
    },
    refuse(requestId: string) {
      usage(requestId, 0n, 'insufficient_quota')
    },
  }
}

/** Today's `posting_rows` as the table `postings` an older schema has. */
class PostingsAsTheyWere implements KyselyPlugin {
  private readonly rename = new (class extends OperationNodeTransformer {
    protected override transformIdentifier(node: IdentifierNode): IdentifierNode {
      return node.name === 'posting_rows' ? IdentifierNode.create('postings') : node
    }
  })()

  transformQuery: KyselyPlugin['transformQuery'] = (args) => this.rename.transformNode(args.node)
  transformResult: KyselyPlugin['transformResult'] = async (args) => args.result
}
