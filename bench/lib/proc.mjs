// The bench's own view of the process table. It is deliberately independent of
// corral's ProcessTable, so corral is never the judge of its own cleanliness.
import * as fs from "node:fs"

const readStat = (pid) => {
  let line
  try {
    line = fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  } catch {
    return undefined
  }
  // the command name may hold spaces and parentheses: count fields from the last ")"
  const rest = line.slice(line.lastIndexOf(")") + 2).split(" ")
  return { pid, state: rest[0], ppid: Number(rest[1]), pgid: Number(rest[2]), sid: Number(rest[3]), threads: Number(rest[17]) }
}

const carries = (pid, marker) => {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, "latin1").includes(`BENCH_MARKER=${marker}`)
  } catch {
    return false
  }
}

/** A zombie (or dead) process with no other thread running is gone: it holds no resources but a table slot. */
export const isGone = (p) => (p.state === "Z" || p.state === "X") && p.threads <= 1

export const scan = () => {
  const out = []
  for (const name of fs.readdirSync("/proc")) {
    const c = name.charCodeAt(0)
    if (c < 48 || c > 57) continue
    const info = readStat(Number(name))
    if (info !== undefined) out.push(info)
  }
  return out
}

/**
 * Live processes of a workload: members of its groups or sessions, and anything
 * carrying its marker (which also catches processes that left the group, and
 * workloads a peer did not start in a group of their own).
 */
export const liveMembers = ({ marker, groups = [] }) => {
  const ids = new Set(groups)
  return scan().filter((p) =>
    p.pid !== process.pid && !isGone(p) && (ids.has(p.pgid) || ids.has(p.sid) || carries(p.pid, marker))
  )
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls until the workload has at least `count` live processes. */
export const awaitMembers = async (target, count, timeoutMs = 10_000) => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const live = liveMembers(target).length
    if (live >= count) return live
    if (performance.now() > deadline) throw new Error(`workload reached only ${live} of ${count} processes in ${timeoutMs} ms`)
    await sleep(count > 100 ? 20 : 2)
  }
}

/**
 * SIGKILLs whatever a run left alive, by group and by pid (never the bench itself),
 * until nothing of the workload is alive, so the next run starts from an empty table.
 */
export const killLeftovers = async (target, timeoutMs = 5000) => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const live = liveMembers(target)
    if (live.length === 0) return
    if (performance.now() > deadline) throw new Error(`could not clear ${live.length} leftover processes`)
    // the group signal first: it also catches children forked while we scanned
    for (const g of target.groups ?? []) signal(-g, "SIGKILL")
    for (const p of live) signal(p.pid, "SIGKILL")
    await sleep(5)
  }
}

const ownGroup = readStat(process.pid)?.pgid

/** Never signals pid <= 1, the bench itself, or the bench's own group. */
export const signal = (target, name) => {
  const id = Math.abs(target)
  if (id <= 1 || id === process.pid || (target < 0 && id === ownGroup)) return false
  try {
    process.kill(target, name)
    return true
  } catch {
    return false
  }
}

export { sleep }
