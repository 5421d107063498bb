/**
 * A PID-namespace shell as its stop's first look reads it from outside:
 * the pids its namespace's own /proc lists, and whom a signal to its
 * leader's group reached.
 */
import * as fs from "node:fs"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type { Reached } from "../GroupStop.js"

/**
 * The pids, as the namespace numbers them, that the /proc `unshare
 * --mount-proc` mounted in it lists, reached through the root of `leader`
 * (`unshare`, which shares that mount namespace); undefined where it cannot
 * be read (the leader is gone, or this user may not look into it).
 */
export const ownProcs = (leader: number): ReadonlyArray<number> | undefined => {
  try {
    const pids: Array<number> = []
    for (const name of fs.readdirSync(`/proc/${leader}/root/proc`)) {
      const pid = Number(name)
      if (Number.isInteger(pid) && pid > 0) pids.push(pid)
    }
    return pids
  } catch {
    return undefined
  }
}

/**
 * Whom a first signal to the leader's group reached: `size` processes, and
 * a member of the group read later if it was born before `now` (ticks since
 * boot, as the process table tells start times). One born in the same tick
 * counts as not reached, and gets the signal again by pid: never none.
 * Its pids are the host's, which the namespace's /proc does not tell: none
 * are assumed members.
 */
export const reached = (size: number, now: number): Reached => ({
  size,
  has: (_pid, startTime) => startTime < now,
  [Symbol.iterator]: () => [][Symbol.iterator]()
})

/** Calls back once `deferred` is done, never before returning (as `Leader.onExit`); returns what cancels that. */
export const onDone = <A, E>(deferred: Deferred.Deferred<A, E>) => (f: () => void): () => void => {
  const fiber = Effect.runFork(Effect.zipRight(Effect.zipRight(Effect.exit(Deferred.await(deferred)), Effect.yieldNow()), Effect.sync(f)))
  return () => fiber.unsafeInterruptAsFork(FiberId.none)
}
