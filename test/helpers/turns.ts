/**
 * How many turns of the event loop ran other work while `fn` ran: a read that never yields the loop leaves none, one
 * that yields between its statements about one per statement. Counted, not timed, so a busy machine cannot change it.
 */
export async function turnsDuring(fn: () => Promise<unknown>): Promise<number> {
  let turns = 0
  let running = true
  const tick = () => {
    if (!running) return
    turns++
    setImmediate(tick)
  }
  setImmediate(tick)
  try {
    await fn()
  } finally {
    running = false
  }
  return turns
}
