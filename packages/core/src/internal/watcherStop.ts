/**
 * What the watcher runs once its supervisor has gone and groups are left:
 * each announced target, checked against the schema the supervisor encoded
 * it with (one that does not decode is skipped), is stopped with the
 * supervisor's limits, then the emptied cgroups are removed.
 */
import * as path from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { stopGroups } from "../GroupStop.js"
import type { StopTarget } from "../GroupStop.js"
import { defaults, Limits } from "../Limits.js"
import { ProcessTable } from "../ProcessTable.js"
import * as CellRelease from "./cellRelease.js"
import * as Cgroup from "./cgroup.js"
import { decodeLimits, StopTarget as StopTargetSchema } from "./watcherMessage.js"

const decodeTarget = Schema.decodeUnknownOption(StopTargetSchema)

/** Stops `announced` (the targets as sent) with the limits of `limitsArg` (the watcher's argument; the defaults when it is missing or malformed). */
export const stopAnnounced = (announced: ReadonlyArray<unknown>, limitsArg: string | undefined): Promise<void> => {
  const targets = outermost(announced.flatMap((target) => Option.toArray(decodeTarget(target))))
  const limits = decodeLimits(limitsArg)
  const layer = Layer.mergeAll(
    ProcessTable.layer,
    Option.match(limits, {
      onNone: () => Limits.layerWith(defaults),
      onSome: ({ grace, killTimeout, killInterval }) =>
        Limits.layerWith({ grace: Duration.millis(grace), killTimeout: Duration.millis(killTimeout), killInterval: Duration.millis(killInterval) })
    })
  )
  return Effect.runPromise(Effect.provide(Effect.zipRight(stopGroups(targets), removeCgroups(targets)), layer))
}

/**
 * The targets not inside another's cgroup: a shell's cell inside the cells
 * its supervisor had watched as a whole (`Watcher.watchCells`) is stopped
 * with them, and would otherwise be signalled twice.
 */
const outermost = (targets: ReadonlyArray<StopTarget>) => {
  const cgroups = targets.flatMap(({ cgroup }) => (cgroup === undefined ? [] : [`${cgroup}/`]))
  return targets.filter(({ cgroup }) => cgroup === undefined || !cgroups.some((outer) => cgroup.startsWith(outer)))
}

/**
 * The shells' cells, each released as a scope releases it (struck first if
 * it is still populated), then their supervisor's own parent cgroup: no one
 * else would remove them when the supervisor's PID namespace ends with it.
 */
const removeCgroups = (targets: ReadonlyArray<StopTarget>) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const cells = targets.flatMap(({ cgroup }) => (cgroup === undefined ? [] : [cgroup]))
    yield* Effect.forEach(cells, (cell) => CellRelease.release(cell, table), { discard: true })
    const parents = new Set(cells.map((cell) => path.dirname(cell)))
    for (const parent of parents) if (path.basename(parent).startsWith("corral-")) Cgroup.remove(parent)
  })
