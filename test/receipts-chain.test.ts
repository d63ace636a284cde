import { createHash } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getAddress, parseEventLogs, type Address, type Hex } from 'viem'
import { usdcAbi } from '../src/chain/contracts.js'
import { verifyReceipt } from '../src/receipts/verify.js'
import { chat, P, type Market } from './helpers/market.js'
import { hasAnvil, hello, newPayer, startChainMarket, USDC, type Chain, type ChainMarket } from './helpers/chain.js'
import { svc as run } from './helpers/cli.js'
import { altered, getWithKey, proofOf, receiptOf, signersOf } from './helpers/receipts.js'

describe.skipIf(!hasAnvil)('receipts on chain (anvil)', () => {
  let c: Chain
  let m: Market
  let env: ChainMarket | undefined

  beforeEach(async () => {
    env = await startChainMarket()
    ;({ c, m } = env)
  })
  afterEach(() => env?.close())

  /** A request sent as exactly these bytes; its svc object. */
  async function ask(body: string): Promise<{ receipt_id: string; request_id: string; cost_usdc: string }> {
    const res = await chat(m.url, m.key, body)
    expect(res.status).toBe(200)
    return ((await res.json()) as { svc: { receipt_id: string; request_id: string; cost_usdc: string } }).svc
  }
  const atlas = JSON.stringify({ model: 'svc/atlas@1', messages: hello, max_tokens: 400 })

  it("verifies a request's receipt end to end after a settlement pass, and says why a changed one fails", async () => {
    const svc = await ask(atlas)
    expect(svc.receipt_id).toBe(`rct_${svc.request_id.slice(4)}`)
    const signed = await receiptOf(m.url, m.key, svc.receipt_id)
    expect(signed.receipt).toMatchObject({
      request_id: svc.request_id,
      payer: env!.payer.address,
      model: 'svc/atlas@1',
      provider: P.atlasCheap,
      body_sha256: createHash('sha256').update(atlas).digest('hex'),
      input_price_per_mtok: '150000',
      output_price_per_mtok: '600000',
      cost: String(Math.round(Number(svc.cost_usdc) * 1e6)),
      outcome: 'completed',
    })
    expect(signed.domain).toEqual({
      name: 'svc receipts',
      version: '1',
      chainId: 31337,
      verifyingContract: getAddress(c.settler),
    })
    // Before its batch is settled there is no proof, and the error says so.
    const early = await getWithKey(m.url, m.key, `/v1/usage/${svc.request_id}/proof`)
    expect(early.status).toBe(409)
    expect(early.body.error).toMatchObject({ code: 'feature_not_supported', param: 'request_id' })
    expect((early.body.error as { message: string }).message).toMatch(/not settled yet/)
    expect(early.requestId).toMatch(/^req_/)

    await m.server.settler.runOnce()
    const proof = await proofOf(m.url, m.key, svc.receipt_id)
    expect(proof).toMatchObject({ rail: 'evm', chain_id: 31337, request_id: svc.request_id })
    const signers = await signersOf(m.url)
    expect(signers[0]!.address).toBe(signed.signer)
    const verdict = await verifyReceipt({ signed, signers, proof, chain: c.client })
    expect(verdict.checks.map((k) => [k.name, k.ok])).toEqual([
      ['signature', true],
      ['leaf', true],
      ['proof', true],
      ['chain', true],
    ])
    expect(verdict).toMatchObject({ ok: true, complete: true })
    // The same through `svc receipt verify`, from a file of the receipt and its proof, as anyone holding it would.
    const file = join(mkdtempSync(join(tmpdir(), 'svc-receipt-')), `${svc.receipt_id}.json`)
    writeFileSync(file, JSON.stringify({ ...signed, proof }))
    const cli = await run(['receipt', 'verify', file, '--base-url', m.url, '--rpc-url', c.anvil.rpcUrl])
    expect(cli.code).toBe(0)
    expect(cli.stdout).toContain(`receipt ${svc.receipt_id}: verified`)
    expect(cli.stdout).toMatch(new RegExp(`holds +chain: transaction ${proof.tx_hash} \\(block \\d+\\) on chain 31337`))

    const other = await newPayer(c, USDC, USDC)
    const changes = {
      'cost + 1 base unit': { cost: String(BigInt(signed.receipt.cost) + 1n) },
      'another wallet': { payer: other.address },
      'another provider': { provider: P.atlasDear },
    }
    for (const [what, change] of Object.entries(changes)) {
      const v = await verifyReceipt({ signed: altered(signed, change), signers, proof, chain: c.client })
      const failed = Object.fromEntries(v.checks.filter((k) => k.ok === false).map((k) => [k.name, k.detail]))
      expect(v.ok, what).toBe(false)
      expect(failed.signature, what).toMatch(/not a published receipt signer/)
      expect(failed.leaf, what).toMatch(/not the one its batch committed to/)
      expect(failed.proof, what).toMatch(/not to the batch's root/)
    }
  })

  it('fails a proof against the wrong batch', async () => {
    const first = await ask(atlas)
    await m.server.settler.runOnce()
    const second = await ask(atlas)
    await m.server.settler.runOnce()
    const signed = await receiptOf(m.url, m.key, first.receipt_id)
    const signers = await signersOf(m.url)
    const own = await proofOf(m.url, m.key, first.receipt_id)
    const theirs = await proofOf(m.url, m.key, second.receipt_id)
    expect(theirs.batch_id).not.toBe(own.batch_id)

    // The other batch's proof: not this receipt's leaf, and its path does not lead to that batch's root.
    const wrong = await verifyReceipt({ signed, signers, proof: theirs, chain: c.client })
    expect(wrong.ok).toBe(false)
    expect(wrong.checks.find((k) => k.name === 'leaf')!.detail).toMatch(/not the one its batch committed to/)
    // Its own path and root, claimed to be the other batch's transaction: the chain records another root there.
    const moved = { ...own, batch_id: theirs.batch_id, batch_key: theirs.batch_key, tx_hash: theirs.tx_hash }
    const onChain = await verifyReceipt({ signed, signers, proof: moved, chain: c.client })
    const chainCheck = onChain.checks.find((k) => k.name === 'chain')!
    expect(chainCheck.ok).toBe(false)
    expect(chainCheck.detail).toMatch(
      new RegExp(`records root ${theirs.root} for batch ${theirs.batch_id}, not the proof's ${own.root}`),
    )
    expect(onChain.checks.filter((k) => k.ok === false).map((k) => k.name)).toEqual(['chain'])
  })

  it('has the receipts of a batch sum to the USDC its transaction moved', async () => {
    const ids: string[] = []
    for (const model of ['svc/atlas@1', 'svc/tern@2', 'svc/atlas@1'])
      ids.push((await ask(JSON.stringify({ model, messages: hello, max_tokens: 400 }))).receipt_id)
    const report = await m.server.settler.runOnce()
    expect(report.batches).toHaveLength(1)
    const receipts = await Promise.all(ids.map((id) => receiptOf(m.url, m.key, id)))
    const proofs = await Promise.all(ids.map((id) => proofOf(m.url, m.key, id)))
    expect(new Set(proofs.map((p) => p.tx_hash)).size).toBe(1)
    expect(new Set(proofs.map((p) => p.root)).size).toBe(1)
    const tx = await c.client.getTransactionReceipt({ hash: proofs[0]!.tx_hash as Hex })
    const moved = parseEventLogs({ abi: usdcAbi, logs: tx.logs, eventName: 'Transfer' })
      .filter((l) => getAddress(l.args.from) === (env!.payer.address as Address))
      .reduce((s, l) => s + l.args.value, 0n)
    const charged = receipts.reduce((s, r) => s + BigInt(r.receipt.cost), 0n)
    expect(charged).toBeGreaterThan(0n)
    expect(moved).toBe(charged)
    expect(moved).toBe(report.batches[0]!.total)
  })
})
