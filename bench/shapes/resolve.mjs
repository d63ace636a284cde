// The resolve hook of bench/shapes/hook.mjs: the built ledger ops module resolves to the prototype.
const PROTOTYPE = new URL('./once-at-close.mjs', import.meta.url).href

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  return resolved.url.endsWith('/dist/store/sqlite-ledger-ops.js') ? { ...resolved, url: PROTOTYPE } : resolved
}
