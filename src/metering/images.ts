/**
 * Image inputs, metered by one documented rule (docs/architecture.md §7): an image is scaled to fit 2,048 × 2,048,
 * then down until its shorter side is at most 768, and costs 85 tokens plus 170 for each 512 × 512 tile it then
 * covers; `detail: "low"` costs 85. An image whose size cannot be read (an https URL: the gateway fetches nothing)
 * costs the most the rule can give, 1,445 (8 tiles). They are input tokens, priced at the offer's input price.
 */

export const IMAGE_BASE_TOKENS = 85
export const IMAGE_TILE_TOKENS = 170
/** The most tiles an image can cover under the rule: 768 × 2,048 is 2 × 4 tiles. */
const MAX_TILES = 8
export const IMAGE_MAX_TOKENS = IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * MAX_TILES

/** Most images one request may carry. */
export const MAX_IMAGES = 16
/** Most bytes one image sent as a data URL may hold. */
export const MAX_IMAGE_BYTES = 3 * 1024 * 1024

const DATA_URL = /^data:image\/(png|jpeg|gif|webp);base64,([A-Za-z0-9+/]*={0,2})$/

/** What an image part is, once read: its size when a data URL carries one we can read. */
export type ImageRead = { tokens: number } | { error: string }

/** Tokens of an image of `width` × `height` at `detail`. */
export function imageTokens(width: number, height: number, detail: string | undefined): number {
  if (detail === 'low') return IMAGE_BASE_TOKENS
  let w = width
  let h = height
  const fit = Math.min(1, 2048 / Math.max(w, h))
  w *= fit
  h *= fit
  const shorter = Math.min(1, 768 / Math.min(w, h))
  w *= shorter
  h *= shorter
  return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * Math.ceil(w / 512) * Math.ceil(h / 512)
}

/** An `image_url` part's URL read and metered: a data URL of PNG, JPEG, GIF or WebP, or an https URL. */
export function readImage(url: unknown, detail: unknown): ImageRead {
  if (detail !== undefined && detail !== 'low' && detail !== 'high' && detail !== 'auto')
    return { error: 'detail must be "low", "high" or "auto"' }
  const d = detail as string | undefined
  if (typeof url !== 'string') return { error: 'image_url.url must be a string' }
  if (url.startsWith('https://')) return { tokens: d === 'low' ? IMAGE_BASE_TOKENS : IMAGE_MAX_TOKENS }
  const m = DATA_URL.exec(url)
  if (!m) return { error: 'image_url.url must be an https URL or a base64 data URL of a PNG, JPEG, GIF or WebP image' }
  const bytes = Buffer.from(m[2]!, 'base64')
  if (bytes.length > MAX_IMAGE_BYTES) return { error: `the image is larger than ${MAX_IMAGE_BYTES / 1024 / 1024} MiB` }
  const size = sizeOf(m[1]!, bytes)
  if (!size) return { error: `the data URL does not hold a readable ${m[1]} image` }
  return { tokens: imageTokens(size.width, size.height, d) }
}

/** Width and height from an image's header; undefined when it is not the format it claims. */
export function sizeOf(format: string, b: Buffer): { width: number; height: number } | undefined {
  const ok = (width: number, height: number) => (width > 0 && height > 0 ? { width, height } : undefined)
  if (format === 'png') {
    if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined
    return ok(b.readUInt32BE(16), b.readUInt32BE(20))
  }
  if (format === 'gif') {
    if (b.length < 10 || b.toString('latin1', 0, 3) !== 'GIF') return undefined
    return ok(b.readUInt16LE(6), b.readUInt16LE(8))
  }
  if (format === 'webp') return webpSize(b)
  return jpegSize(b)
}

function webpSize(b: Buffer): { width: number; height: number } | undefined {
  if (b.length < 30 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WEBP') return undefined
  const chunk = b.toString('latin1', 12, 16)
  if (chunk === 'VP8X') return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) }
  if (chunk === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff }
  if (chunk === 'VP8L') {
    const bits = b.readUInt32LE(21)
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >> 14) & 0x3fff) }
  }
  return undefined
}

/** A JPEG's size from its first start-of-frame marker. */
function jpegSize(b: Buffer): { width: number; height: number } | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined
  let at = 2
  while (at + 9 < b.length) {
    if (b[at] !== 0xff) return undefined
    const marker = b[at + 1]!
    const length = b.readUInt16BE(at + 2)
    // SOF0–SOF15, except DHT (C4), JPG (C8) and DAC (CC).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc)
      return { height: b.readUInt16BE(at + 5), width: b.readUInt16BE(at + 7) }
    at += 2 + length
  }
  return undefined
}
