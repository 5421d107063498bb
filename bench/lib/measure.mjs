// One measured stop: start a workload, wait until it has grown, stop it with
// one implementation, and look at what is left.
import { randomBytes } from "node:crypto"
import { settlesWithin } from "./peers.mjs"
import { awaitMembers, killLeftovers, liveMembers, sleep } from "./proc.mjs"

/** How long after a stop returned the table is looked at again, to tell "still dying" from "left behind". */
export const SETTLE_MS = 50
/** A stop that has not returned this long after its grace is recorded as hung. */
export const HANG_MARGIN_MS = 2000

export const newMarker = () => `bench-${randomBytes(6).toString("hex")}`

/**
 * Starts `count` copies of `workload` (each tagged with the marker), stops them
 * with `peer.stopMany` and reports the stop's duration and what survived it.
 * `clean` means nothing of the workload was alive when the stop returned.
 * With `everywhere`, the workload is every process in the batch's namespace
 * but the bench's own and the `exempt` groups (idle load the scenario
 * started), so a process that escaped the group, the session and the marker
 * still counts; leftovers are killed the same way. `containment` is the
 * backend corral reported for its groups, when the peer is corral.
 */
export const measureStop = async (peer, { workload, grace, count = 1, everywhere = false, exempt = [] }) => {
  const marker = newMarker()
  const handles = []
  const target = { marker, groups: [], everywhere, exempt }
  let stopping = Promise.resolve()
  let failure
  try {
    for (let i = 0; i < count; i++) {
      const handle = await peer.start({ argv: workload.argv, env: { BENCH_MARKER: `${marker}-${i}` }, grace })
      handles.push(handle)
      target.groups.push(...handle.groups)
    }
    // a thousand forks can take well over 10 s on a loaded machine
    // under pidns each shell has `unshare` and the namespace's init besides the workload's own processes
    const machinery = handles.filter((h) => h.containment === "pidns").length * 2
    await awaitMembers(target, workload.processes * count + machinery, Math.max(10_000, 30 * workload.processes * count), (workload.sleeps ?? 0) * count)
    const began = performance.now()
    stopping = peer.stopMany(handles).catch((error) => (failure = error))
    const timedOut = !(await settlesWithin(stopping, grace + HANG_MARGIN_MS))
    const value = performance.now() - began
    const alive = liveMembers(target).length
    await sleep(SETTLE_MS)
    const aliveLater = liveMembers(target).length
    if (failure !== undefined) throw failure
    const sample = { value, clean: alive === 0 && !timedOut, alive, aliveLater, timedOut }
    const containment = [...new Set(handles.map((h) => h.containment).filter(Boolean))].join("+")
    return containment === "" ? sample : { ...sample, containment }
  } finally {
    await killLeftovers(target)
    // a hung stop returns once its leader is dead; give it the chance, then let go
    await settlesWithin(stopping, 2000)
    await Promise.all(handles.map((h) => peer.dispose(h)))
  }
}
