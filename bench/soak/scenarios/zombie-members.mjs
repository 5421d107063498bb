// Every member a zombie under a PID 1 that never reaps: kill(-pgid, 0) still
// succeeds, so a stop that waits for ESRCH would wait out grace and kill timeout.
import { GroupStop, ProcessTable } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { awaitFinal, check, start, waitFor, withRegistry } from "../lib/harness.mjs"

const ORPHANS = 6

export default {
  id: "zombie-members",
  summary: `leader exits, its ${ORPHANS} orphans die unreaped under Node as PID 1 (under pidns and procScan, reaped by the shell's own init)`,
  orphans: true,
  run: (ctx) =>
    withRegistry(ctx, Effect.gen(function*() {
      yield* check(process.pid === 1, `needs Node as the namespace's PID 1 (this runner is pid ${process.pid})`)
      const table = yield* ProcessTable
      const bornAfter = (yield* table.now) - 1
      const shell = yield* start(`for i in $(seq ${ORPHANS}); do (sleep 0.2 &); done`)
      // a pidns shell's namespace has an init of its own that reaps, and so does a procScan shell, led by
      // corral's init (a child subreaper, ADR 58) where perl is there: its orphans never stay zombies
      const ledByInit = shell.containment === "pidns" || Kernel.scan().some((p) => p.pid === shell.pid && p.comm === "perl")
      if (ledByInit) {
        yield* waitFor(`group ${shell.pid} reaped by the shell's own init`, () =>
          Kernel.scan().some((p) => p.pgid === shell.pid) ? undefined : true)
      } else {
        const zombies = yield* waitFor(`${ORPHANS} zombies in group ${shell.pid}`, () => {
          const inGroup = Kernel.scan().filter((p) => p.pgid === shell.pid)
          return inGroup.length >= ORPHANS && inGroup.every(Kernel.isZombie) ? inGroup : undefined
        })
        // the hazard is really there: the kernel still counts the group as existing
        yield* check(groupExists(shell.pid), `group ${shell.pid} of ${zombies.length} zombies is already gone; nothing was tested`)
      }
      const info = yield* awaitFinal(shell)
      yield* check(info.status._tag === "Exited" && info.status.code === 0, `a shell whose members are all zombies ended as ${JSON.stringify(info.status)}, not Exited 0`)
      const report = yield* GroupStop.stopGroup({ pgid: shell.pid, sid: shell.pid, startTime: bornAfter })
      yield* check(
        !report.escalated && report.members === 0 && report.signals.SIGKILL === 0,
        `stopping an all-zombie group waited for the zombies: ${JSON.stringify(report)}`
      )
      ctx.record("stop ms", report.durationMs)
    }))
}

const groupExists = (pgid) => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}
