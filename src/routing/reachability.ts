/**
 * Whether each provider's endpoint can be reached, as attempts (and the start's probe) find it. A change either way is
 * told once, so an operator sees an upstream that is gone rather than only busy.
 */
export class Reachability {
  /** Providers last found unreachable, with why. */
  private readonly down = new Map<string, string>()

  constructor(private readonly onChange: (provider: string, reachable: boolean, detail?: string) => void = () => {}) {}

  /** The provider answered (any HTTP status counts). */
  reached(provider: string): void {
    if (this.down.delete(provider)) this.onChange(provider, true)
  }

  /** A connection to the provider could not be made. */
  unreachable(provider: string, detail: string): void {
    if (this.down.has(provider)) return
    this.down.set(provider, detail)
    this.onChange(provider, false, detail)
  }

  /** Why each of these providers cannot be reached; undefined unless every one of them is known unreachable. */
  allDown(providers: Iterable<string>): string | undefined {
    let why: string | undefined
    for (const p of providers) {
      const detail = this.down.get(p)
      if (detail === undefined) return undefined
      why ??= detail
    }
    return why
  }
}
