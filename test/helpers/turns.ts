/** A count of the event loop's turns from now until `stop()`: one `setImmediate` after another. */
function turnCounter(): { readonly turns: number; stop(): void } {
  let turns = 0
  let running = true
  const tick = () => {
    if (!running) return
    turns++
    setImmediate(tick)
  }
  setImmediate(tick)
  return {
    get turns() {
      return turns
    },
    stop: () => void (running = false),
  }
}

/**
 * How many turns of the event loop ran other work while `fn` ran: a read that never yields the loop leaves none, one
 * that yields between its statements about one per statement. Counted, not timed, so a busy machine cannot change it.
 */
export async function turnsDuring(fn: () => Promise<unknown>): Promise<number> {
  const counter = turnCounter()
  try {
    await fn()
  } finally {
    counter.stop()
  }
  return counter.turns
}

/**
 * The code units each turn of the event loop counted while `fn` ran, for the turns that counted any (`TextCount`
 * steps), in order: how a count in steps shares the event loop, counted, not timed.
 */
export async function countedByTurn<T>(fn: () => Promise<T>): Promise<{ result: T; perTurn: number[] }> {
  const { TextCount } = await import('../../src/metering/o200k.js')
  const counted = new Map<number, number>()
  const counter = turnCounter()
  const step = TextCount.prototype.step
  TextCount.prototype.step = function (this: InstanceType<typeof TextCount>, units: number) {
    const before = this.position
    const done = step.call(this, units)
    counted.set(counter.turns, (counted.get(counter.turns) ?? 0) + this.position - before)
    return done
  }
  try {
    return { result: await fn(), perTurn: [...counted.values()] }
  } finally {
    counter.stop()
    TextCount.prototype.step = step
  }
}
