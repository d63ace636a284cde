/**
 * The metadata of a GGUF file (llama.cpp's model format, v2 and v3), as far as a tokenizer needs it: its key-value
 * pairs; arrays of strings and numbers as arrays. Tensors are not read.
 */
export type GgufValue = string | number | bigint | boolean | GgufValue[]

const STRING = 8
const ARRAY = 9
/** Sizes of the fixed-size value types by their number (u8, i8, u16, i16, u32, i32, f32, bool, -, -, u64, i64, f64). */
const SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 }

export class GgufError extends Error {}

export function ggufMetadata(b: Buffer): Map<string, GgufValue> {
  let o = 0
  const need = (n: number) => {
    if (o + n > b.length) throw new GgufError('the file ends inside its metadata')
  }
  const u32 = () => (need(4), (o += 4), b.readUInt32LE(o - 4))
  const u64 = () => {
    need(8)
    o += 8
    const n = b.readBigUInt64LE(o - 8)
    if (n > BigInt(b.length)) throw new GgufError('a length past the end of the file')
    return Number(n)
  }
  const str = () => {
    const n = u64()
    need(n)
    return b.toString('utf8', (o += n) - n, o)
  }
  const value = (type: number): GgufValue => {
    if (type === STRING) return str()
    if (type === ARRAY) {
      const item = u32()
      const n = u64()
      const out: GgufValue[] = []
      for (let i = 0; i < n; i++) out.push(value(item))
      return out
    }
    const size = SIZES[type]
    if (size === undefined) throw new GgufError(`unknown value type ${type}`)
    need(size)
    const at = o
    o += size
    switch (type) {
      case 0:
        return b.readUInt8(at)
      case 1:
        return b.readInt8(at)
      case 2:
        return b.readUInt16LE(at)
      case 3:
        return b.readInt16LE(at)
      case 4:
        return b.readUInt32LE(at)
      case 5:
        return b.readInt32LE(at)
      case 6:
        return b.readFloatLE(at)
      case 7:
        return b.readUInt8(at) !== 0
      case 10:
        return b.readBigUInt64LE(at)
      case 11:
        return b.readBigInt64LE(at)
      default:
        return b.readDoubleLE(at)
    }
  }
  if (b.length < 24 || b.toString('latin1', 0, 4) !== 'GGUF') throw new GgufError('not a GGUF file')
  o = 4
  if (u32() < 2) throw new GgufError('a GGUF file before version 2')
  o += 8
  const kv = new Map<string, GgufValue>()
  for (let n = u64(); n > 0; n--) {
    const key = str()
    kv.set(key, value(u32()))
  }
  return kv
}
