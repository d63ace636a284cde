// GGUF, llama.cpp's model format: its metadata read, and a file of metadata and tensors written (f32, f16, Q8_0 and
// Q4_0 tensors), for scripts/make-model.mjs.

// GGUF value types, ggml tensor types and llama file types.
export const ALIGN = 32
export const T = {
  U8: 0,
  I8: 1,
  U16: 2,
  I16: 3,
  U32: 4,
  I32: 5,
  F32: 6,
  BOOL: 7,
  STR: 8,
  ARR: 9,
  U64: 10,
  I64: 11,
  F64: 12,
}
export const GGML = { f32: 0, f16: 1, q4_0: 2, q8_0: 8 }
export const FILE_TYPE = { f32: 0, f16: 1, q4_0: 2, q8_0: 7 }

/** The metadata of a GGUF file (v2 or v3): key → { type, value }, arrays as { type, items }. */
export function readGguf(b) {
  let o = 0
  const u32 = () => ((o += 4), b.readUInt32LE(o - 4))
  const u64 = () => ((o += 8), Number(b.readBigUInt64LE(o - 8)))
  const str = () => {
    const n = u64()
    return b.toString('utf8', (o += n) - n, o)
  }
  const fixed = {
    [T.U8]: [1, (at) => b.readUInt8(at)],
    [T.I8]: [1, (at) => b.readInt8(at)],
    [T.U16]: [2, (at) => b.readUInt16LE(at)],
    [T.I16]: [2, (at) => b.readInt16LE(at)],
    [T.U32]: [4, (at) => b.readUInt32LE(at)],
    [T.I32]: [4, (at) => b.readInt32LE(at)],
    [T.F32]: [4, (at) => b.readFloatLE(at)],
    [T.BOOL]: [1, (at) => b.readUInt8(at) !== 0],
    [T.U64]: [8, (at) => b.readBigUInt64LE(at)],
    [T.I64]: [8, (at) => b.readBigInt64LE(at)],
    [T.F64]: [8, (at) => b.readDoubleLE(at)],
  }
  const value = (type) => {
    if (type === T.STR) return str()
    if (type === T.ARR) {
      const items = { type: u32(), items: [] }
      for (let n = u64(); n > 0; n--) items.items.push(value(items.type))
      return items
    }
    const [size, read] = fixed[type] ?? []
    if (!read) throw new Error(`unknown GGUF value type ${type}`)
    return read((o += size) - size)
  }
  if (b.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file')
  o = 4
  if (u32() < 2) throw new Error('GGUF before version 2')
  u64()
  const kv = new Map()
  for (let n = u64(); n > 0; n--) {
    const key = str()
    const type = u32()
    kv.set(key, { type, value: value(type) })
  }
  return kv
}

/** GGUF v3 bytes of `kv` (key → { type, value }) and `tensors` ({ name, dims, data: Float32Array, type }). */
export function writeGguf(kv, tensors) {
  const parts = []
  let length = 0
  const push = (buf) => {
    parts.push(buf)
    length += buf.length
  }
  const num = (size, write) => {
    const buf = Buffer.alloc(size)
    write(buf)
    push(buf)
  }
  const u32 = (v) => num(4, (x) => x.writeUInt32LE(v))
  const u64 = (v) => num(8, (x) => x.writeBigUInt64LE(BigInt(v)))
  const str = (s) => {
    const buf = Buffer.from(s, 'utf8')
    u64(buf.length)
    push(buf)
  }
  const writers = {
    [T.U8]: (v) => num(1, (x) => x.writeUInt8(v)),
    [T.I8]: (v) => num(1, (x) => x.writeInt8(v)),
    [T.U16]: (v) => num(2, (x) => x.writeUInt16LE(v)),
    [T.I16]: (v) => num(2, (x) => x.writeInt16LE(v)),
    [T.U32]: u32,
    [T.I32]: (v) => num(4, (x) => x.writeInt32LE(v)),
    [T.F32]: (v) => num(4, (x) => x.writeFloatLE(v)),
    [T.BOOL]: (v) => num(1, (x) => x.writeUInt8(v ? 1 : 0)),
    [T.STR]: str,
    [T.U64]: u64,
    [T.I64]: (v) => num(8, (x) => x.writeBigInt64LE(BigInt(v))),
    [T.F64]: (v) => num(8, (x) => x.writeDoubleLE(v)),
    [T.ARR]: (v) => {
      u32(v.type)
      u64(v.items.length)
      for (const item of v.items) writers[v.type](item)
    },
  }
  const pad = () => {
    if (length % ALIGN) push(Buffer.alloc(ALIGN - (length % ALIGN)))
  }
  push(Buffer.from('GGUF', 'latin1'))
  u32(3)
  u64(tensors.length)
  u64(kv.size)
  for (const [key, { type, value }] of kv) {
    str(key)
    u32(type)
    writers[type](value)
  }
  const blobs = tensors.map((t) => encode(t.data, t.type))
  let offset = 0
  tensors.forEach((t, i) => {
    str(t.name)
    u32(t.dims.length)
    for (const d of t.dims) u64(d)
    u32(GGML[t.type])
    u64(offset)
    offset = Math.ceil((offset + blobs[i].length) / ALIGN) * ALIGN
  })
  pad()
  for (const blob of blobs) {
    push(blob)
    pad()
  }
  return Buffer.concat(parts, length)
}

const f32 = new Float32Array(1)
const f32Bits = new Uint32Array(f32.buffer)
/** The half-precision bits of `x` (exact for the few values these models hold: 0, 1, 30 and scales of them). */
function f16(x) {
  f32[0] = x
  const u = f32Bits[0]
  const sign = (u >>> 16) & 0x8000
  const e = ((u >>> 23) & 0xff) - 112
  if (x === 0) return sign
  if (e <= 0 || e >= 0x1f) throw new Error(`${x} has no exact half-precision form here`)
  return sign | (e << 10) | ((u & 0x7fffff) >>> 13)
}

/** `data` as ggml stores a tensor of `type` (Q8_0 and Q4_0 blocks of 32). */
function encode(data, type) {
  if (type === 'f32') return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (type === 'f16') {
    const out = Buffer.alloc(data.length * 2)
    data.forEach((v, i) => out.writeUInt16LE(f16(v), i * 2))
    return out
  }
  const blocks = data.length / 32
  const block = type === 'q8_0' ? 34 : 18
  const out = Buffer.alloc(blocks * block)
  for (let i = 0; i < blocks; i++) {
    const values = data.subarray(i * 32, i * 32 + 32)
    const peak = values.reduce((m, v) => (Math.abs(v) > Math.abs(m) ? v : m), 0)
    const at = i * block
    if (type === 'q8_0') {
      const d = Math.abs(peak) / 127
      out.writeUInt16LE(f16(d), at)
      values.forEach((v, j) => out.writeInt8(d ? Math.round(v / d) : 0, at + 2 + j))
    } else {
      const d = peak / -8
      out.writeUInt16LE(f16(d), at)
      const q = (v) => Math.min(15, Math.trunc((d ? v / d : 0) + 8.5))
      for (let j = 0; j < 16; j++) out.writeUInt8(q(values[j]) | (q(values[j + 16]) << 4), at + 2 + j)
    }
  }
  return out
}
