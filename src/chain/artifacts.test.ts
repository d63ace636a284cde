import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain ESM script without type declarations
import { ARTIFACTS_FILE, renderArtifacts } from '../../scripts/build-contracts.mjs'

describe('contract artifacts', () => {
  it('match contracts/*.sol compiled with the solc package (run npm run contracts after editing a contract)', () => {
    const fresh = (renderArtifacts as () => string)()
    expect(readFileSync(ARTIFACTS_FILE as string, 'utf8')).toBe(fresh)
  })
})
