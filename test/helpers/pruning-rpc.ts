import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

interface RpcRequest {
  id: number | string
  method: string
  params?: unknown[]
}
interface RpcResponse {
  id: number | string
  result?: unknown
  error?: unknown
}

/** What a node may forget of old blocks: their logs, their receipts, or the index that finds a transaction by hash. */
export type History = 'logs' | 'receipts' | 'index'

/**
 * A JSON-RPC proxy in front of a node that forgets the history of old blocks, as a pruned node does: with
 * `pruneThrough(n)`, logs and receipts of blocks up to n are refused and their transactions are unknown by hash.
 * Headers and state stay, as they do on such a node. `what` narrows it (e.g. only logs).
 */
export class PruningRpc {
  private through = -1n
  private what = new Set<History>(['logs', 'receipts', 'index'])
  private waiters: { method: string; resolve: () => void }[] = []

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(upstream: string): Promise<PruningRpc> {
    // eslint-disable-next-line prefer-const -- assigned once the server it is read by exists
    let self: PruningRpc | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on(
        'end',
        () =>
          void self!.forward(upstream, Buffer.concat(chunks).toString()).then(
            (body) => {
              res.writeHead(200, { 'content-type': 'application/json' })
              res.end(body)
            },
            (err: unknown) => {
              res.writeHead(502)
              res.end(String(err))
            },
          ),
      )
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    self = new PruningRpc(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  /** Forgets blocks up to `block` (-1n: none), for the kinds of history in `what`. */
  pruneThrough(block: bigint, what: History[] = ['logs', 'receipts', 'index']): void {
    this.through = block
    this.what = new Set(what)
  }

  /** Resolves once the node answered a call of `method` with a result (not null), before the caller reads it. */
  answered(method: string): Promise<void> {
    return new Promise((resolve) => this.waiters.push({ method, resolve }))
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  private async forward(upstream: string, body: string): Promise<string> {
    const sent = JSON.parse(body) as RpcRequest | RpcRequest[]
    const res = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const got = (await res.json()) as RpcResponse | RpcResponse[]
    const requests = new Map((Array.isArray(sent) ? sent : [sent]).map((r) => [r.id, r]))
    const answer = (r: RpcResponse) => {
      const req = requests.get(r.id)!
      const out = this.prune(req, r)
      if (out.result !== null && out.result !== undefined) {
        for (const w of this.waiters.filter((w) => w.method === req.method)) w.resolve()
        this.waiters = this.waiters.filter((w) => w.method !== req.method)
      }
      return out
    }
    return JSON.stringify(Array.isArray(got) ? got.map(answer) : answer(got))
  }

  private prune(req: RpcRequest, r: RpcResponse): RpcResponse {
    const old = (block: unknown) => typeof block === 'string' && BigInt(block) <= this.through
    const refused = { id: r.id, jsonrpc: '2.0', error: { code: -32000, message: 'pruned history unavailable' } }
    const result = r.result as Record<string, unknown> | Record<string, unknown>[] | null | undefined
    if (!result) return r
    switch (req.method) {
      case 'eth_getLogs':
        return this.what.has('logs') && (result as Record<string, unknown>[]).some((l) => old(l.blockNumber))
          ? refused
          : r
      case 'eth_getBlockReceipts':
        return this.what.has('receipts') && (result as Record<string, unknown>[]).some((x) => old(x.blockNumber))
          ? refused
          : r
      case 'eth_getTransactionReceipt':
        return (this.what.has('receipts') || this.what.has('index')) &&
          old((result as Record<string, unknown>).blockNumber)
          ? { ...r, result: null }
          : r
      case 'eth_getTransactionByHash':
        return this.what.has('index') && old((result as Record<string, unknown>).blockNumber)
          ? { ...r, result: null }
          : r
      default:
        return r
    }
  }
}
