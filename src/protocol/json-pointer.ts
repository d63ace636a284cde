/** `/models/0/id` → `models[0].id` */
export function jsonPointerToPath(pointer: string): string {
  let out = ''
  for (const part of pointer.split('/').slice(1)) {
    out += /^\d+$/.test(part) ? `[${part}]` : out ? `.${part}` : part
  }
  return out || '(root)'
}
