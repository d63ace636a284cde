import { describe, expect, it } from 'vitest'
import { schemaMismatch } from './schema-check.js'

const FLIGHT = {
  type: 'object',
  properties: {
    from: { type: 'string', minLength: 2 },
    passengers: { type: 'integer', minimum: 1, maximum: 9 },
    cabin: { type: 'string', enum: ['economy', 'business'] },
    legs: { type: 'array', minItems: 1, items: { type: 'string' } },
    note: { type: ['string', 'null'] },
  },
  required: ['from', 'passengers', 'cabin'],
  additionalProperties: false,
}

describe('schemaMismatch', () => {
  it('accepts a conforming document', () => {
    expect(
      schemaMismatch(FLIGHT, { from: 'Paris', passengers: 2, cabin: 'economy', legs: ['CDG-FCO'], note: null }),
    ).toBeNull()
  })

  it.each<[string, unknown, RegExp]>([
    ['a missing required property', { from: 'Paris', passengers: 2 }, /\$: missing required cabin/],
    [
      'an extra property',
      { from: 'Paris', passengers: 2, cabin: 'economy', seat: '1A' },
      /\$: unexpected property seat/,
    ],
    ['a wrong type', { from: 'Paris', passengers: '2', cabin: 'economy' }, /\$\.passengers: expected integer/],
    ['a float for an integer', { from: 'Paris', passengers: 1.5, cabin: 'economy' }, /expected integer/],
    ['a value outside the enum', { from: 'Paris', passengers: 2, cabin: 'first' }, /\$\.cabin: not one of the enum/],
    ['a number out of bounds', { from: 'Paris', passengers: 10, cabin: 'economy' }, /above 9/],
    ['a short string', { from: 'P', passengers: 2, cabin: 'economy' }, /shorter than 2/],
    [
      'a bad array item',
      { from: 'Paris', passengers: 2, cabin: 'economy', legs: [1] },
      /\$\.legs\[0\]: expected string/,
    ],
    ['too few items', { from: 'Paris', passengers: 2, cabin: 'economy', legs: [] }, /fewer than 1 items/],
    ['an array for an object', [], /\$: expected object/],
  ])('reports %s with its path', (_what, value, why) => {
    expect(schemaMismatch(FLIGHT, value)).toMatch(why)
  })
})
