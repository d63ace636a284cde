/** The longest the event loop went without running a 1 ms timer while `fn` ran, in ms. */
export async function worstStall(fn: () => Promise<unknown>): Promise<number> {
  let worst = 0
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last)
    last = now
  }, 1)
  try {
    await fn()
    await new Promise((resolve) => setTimeout(resolve, 5))
  } finally {
    clearInterval(timer)
  }
  return worst
}

/**
 * The worst stalls of `whole` and then `sliced`, measured in turn until the sliced one is under a third of the whole
 * one, `tries` times at most: on a busy machine a worker descheduled for tens of ms reads as a stall of either. A read
 * that holds the event loop as long as the whole one fails every time.
 */
export async function stallsOf(whole: () => Promise<unknown>, sliced: () => Promise<unknown>, tries = 3): Promise<{ whole: number; sliced: number }> {
  let last = { whole: 0, sliced: Infinity }
  for (let i = 0; i < tries && !(last.sliced < last.whole / 3); i++) last = { whole: await worstStall(whole), sliced: await worstStall(sliced) }
  return last
}
