import { describe, expect, it } from 'vitest'
import { keccak256, toHex } from 'viem'
import { merkleProof, merkleRoot, rootFromProof } from './merkle.js'

const leaves = (n: number) => Array.from({ length: n }, (_, i) => keccak256(toHex(`leaf ${i}`)))

describe('receipt Merkle trees', () => {
  it('every leaf of trees of 1 to 9 leaves proves the root, and no other leaf does with its proof', () => {
    for (let n = 1; n <= 9; n++) {
      const ls = leaves(n)
      const root = merkleRoot(ls)
      for (let i = 0; i < n; i++) {
        const proof = merkleProof(ls, i)
        expect(rootFromProof(ls[i]!, proof)).toBe(root)
        if (n > 1) expect(rootFromProof(ls[(i + 1) % n]!, proof)).not.toBe(root)
      }
    }
  })

  it('a one-leaf tree is its leaf; an empty one is refused', () => {
    const [l] = leaves(1)
    expect(merkleRoot([l!])).toBe(l)
    expect(() => merkleRoot([])).toThrow(RangeError)
  })
})
