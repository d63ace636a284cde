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

/**
 * The code units each turn of the event loop counted while `fn` ran, for the turns that counted any (`TextCount`
 * steps), in order: how a count in steps shares the event loop, counted, not timed.
 */
export async function countedByTurn<T>(fn: () => Promise<T>): Promise<{ result: T; perTurn: number[] }> {
  const { TextCount } = await import('../../src/metering/o200k.js')
  const counted = new Map<number, number>()
  let turn = 0
  let running = true
  const tick = () => {
    if (!running) return
    turn++
    setImmediate(tick)
  }
  setImmediate(tick)
  const step = TextCount.prototype.step
  TextCount.prototype.step = function (this: InstanceType<typeof TextCount>, units: number) {
    const before = this.position
    const done = step.call(this, units)
    counted.set(turn, (counted.get(turn) ?? 0) + this.position - before)
    return done
  }
  try {
    return { result: await fn(), perTurn: [...counted.values()] }
  } finally {
    running = false
    TextCount.prototype.step = step
  }
}
