import { concat, keccak256, type Hex } from 'viem'

/**
 * Merkle trees of receipt digests: a parent is keccak256 of its two children in ascending order (as OpenZeppelin's
 * MerkleProof), a node without a sibling moves up as it is. Leaves are EIP-712 digests (66-byte preimages), so a
 * leaf can never pass for a parent (64-byte preimages).
 */
function parent(a: Hex, b: Hex): Hex {
  return keccak256(a.toLowerCase() < b.toLowerCase() ? concat([a, b]) : concat([b, a]))
}

/** Levels from the leaves up to the root. */
function levels(leaves: readonly Hex[]): Hex[][] {
  if (leaves.length === 0) throw new RangeError('a Merkle tree needs at least one leaf')
  const out: Hex[][] = [[...leaves]]
  while (out.at(-1)!.length > 1) {
    const below = out.at(-1)!
    const next: Hex[] = []
    for (let i = 0; i < below.length; i += 2)
      next.push(i + 1 < below.length ? parent(below[i]!, below[i + 1]!) : below[i]!)
    out.push(next)
  }
  return out
}

export function merkleRoot(leaves: readonly Hex[]): Hex {
  return levels(leaves).at(-1)![0]!
}

/** The siblings on the path from leaf `index` to the root. */
export function merkleProof(leaves: readonly Hex[], index: number): Hex[] {
  if (index < 0 || index >= leaves.length) throw new RangeError(`no leaf ${index} among ${leaves.length}`)
  const proof: Hex[] = []
  let i = index
  for (const level of levels(leaves).slice(0, -1)) {
    const sibling = i % 2 === 0 ? i + 1 : i - 1
    if (sibling < level.length) proof.push(level[sibling]!)
    i = Math.floor(i / 2)
  }
  return proof
}

/** The root a leaf and its proof lead to. */
export function rootFromProof(leaf: Hex, proof: readonly Hex[]): Hex {
  return proof.reduce<Hex>((node, sibling) => parent(node, sibling), leaf)
}
