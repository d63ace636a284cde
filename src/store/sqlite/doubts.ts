/**
 * Holds whose answer was lost, on SQLite: none. A group's statements run on this process's own connection and its
 * answer cannot be lost on the way (Postgres recounts the counters such holds leave in doubt: postgres/doubts.ts).
 */
export const noDoubts = {
  /** How many lost holds a recount found: none. */
  resolve: async (): Promise<number> => 0,
}
