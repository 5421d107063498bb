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
  return Effect.runPromise(Effect.provide(stopGroups(targets), layer)).then(() => removeCgroups(targets))
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
 * The emptied shells' cgroups, then their supervisor's own parent cgroup:
 * no one else would remove them when the supervisor's PID namespace ends
 * with it. Only empty cgroups go; rmdir refuses a populated one.
 */
const removeCgroups = (targets: ReadonlyArray<StopTarget>) => {
  const parents = new Set<string>()
  for (const { cgroup } of targets) {
    if (cgroup === undefined) continue
    Cgroup.remove(cgroup)
    parents.add(path.dirname(cgroup))
  }
  for (const parent of parents) if (path.basename(parent).startsWith("corral-")) Cgroup.remove(parent)
}
