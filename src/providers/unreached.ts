/** Connection errors that mean the endpoint was not reached at all (as opposed to a reply that failed). */
const UNREACHED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  // An address the marketplace's policy refuses to call (providers' endpoints on private networks).
  'SVC_ADDRESS_REFUSED',
])

/** Whether an error of a connection attempt means its endpoint could not be reached. */
export function isUnreached(code: string | undefined): boolean {
  return code !== undefined && UNREACHED.has(code)
}
