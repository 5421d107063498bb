/**
 * The last word on a cell, once its shell's stop is over: removed if empty,
 * else struck whole first (ADR 33). Used where a cell is let go: a shell's
 * scope, and the watcher after its dead supervisor's shells.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { ProcessTable } from "../ProcessTable.js"
import { bounded } from "./bounded.js"
import * as Cgroup from "./cgroup.js"

/** How long a cell struck at its release may take to empty before it is left for the next supervisor's reaping. */
const EMPTYING_MS = 1_000

/**
 * Removes a cell that its shell's stop has emptied. One the kernel still
 * counts as populated holds what that stop never saw: a process moved in
 * after it, or a hopper whose every listed pid was gone before it could be
 * read. Nothing of the shell may outlive its release, so the cell is struck
 * as a stop's kill strikes it (`cgroup.kill`, and SIGKILL to each pid it
 * lists), and removed once empty; where it does not empty in time (a member
 * in state D, which no signal ends), it is left for the next supervisor's
 * reaping. A warning says which it was.
 */
export const release = (dir: string, table: ProcessTable["Type"]): Effect.Effect<void> =>
  Effect.suspend(() => unsafeRelease(dir, table) ?? Effect.void)

/** `release`, done at once where the cell is removed, or gone (the usual case): else what is left to run. */
export const unsafeRelease = (dir: string, table: ProcessTable["Type"]): Effect.Effect<void> | undefined => {
  if (Cgroup.remove(dir) || !Cgroup.populated(dir)) return undefined
  const held = members(dir).length
  // as a stop's kill rounds strike: the cell whole where the kernel can (5.14 on), and each pid it lists, ours then,
  // for what `cgroup.kill` misses (a zombie leader whose threads still run) and where there is none
  const strike = Effect.suspend(() => {
    Cgroup.kill(dir)
    return Effect.forEach(members(dir), (pid) => table.signal(pid, "SIGKILL"), { discard: true })
  })
  const emptying = Effect.repeat(Effect.zipRight(strike, Effect.sync(() => Cgroup.populated(dir))), {
    while: (populated) => populated,
    schedule: Schedule.spaced(Duration.millis(5))
  })
  return Effect.map(bounded(emptying, Duration.millis(EMPTYING_MS)), (emptied) => {
    const removed = Option.isSome(emptied) && Cgroup.remove(dir)
    process.emitWarning(
      `corral: the cgroup ${dir} still held ${held} process(es) after its shell's stop; ` +
        (removed ? "killed and removed" : `killed, and not empty after ${EMPTYING_MS} ms: left for the next supervisor to reap`)
    )
  })
}

/** Whom the cell and the cells below it list. */
const members = (dir: string) => Cgroup.tree(dir).flatMap((cgroup) => Cgroup.ownProcs(cgroup))
