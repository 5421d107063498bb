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
  const close = line.lastIndexOf(")")
  const rest = line.slice(close + 2).split(" ")
  const comm = line.slice(line.indexOf("(") + 1, close)
  return { pid, comm, state: rest[0], ppid: Number(rest[1]), pgid: Number(rest[2]), sid: Number(rest[3]), threads: Number(rest[17]) }
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

const readCmdline = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "latin1")
  } catch {
    return ""
  }
}

/**
 * Whether this process runs in a batch's PID namespace (lib/namespace.mjs):
 * there PID 1 is the worker or the bash that runs it, and either way its
 * command line names bench/worker.mjs. Outside one, "every other process in
 * the namespace" would be the whole machine, so nothing is counted or killed
 * namespace-wide.
 */
export const inBatchNamespace = (() => {
  let known
  return () => (known ??= readCmdline(1).includes("/bench/worker.mjs"))
})()

/** This process and its ancestors up to PID 1: the bench itself, never a survivor. */
const ownLine = () => {
  const own = new Set([process.pid, 1])
  for (let p = readStat(process.pid); p !== undefined && p.ppid > 1 && !own.has(p.ppid); p = readStat(p.ppid)) own.add(p.ppid)
  return own
}

/**
 * Live processes of a workload: members of its groups or sessions, and anything
 * carrying its marker (which also catches processes that left the group, and
 * workloads a peer did not start in a group of their own). With `everywhere`
 * (inside a batch namespace only), also every other live process in the
 * namespace that is not the bench's own: what escaped the group, the session
 * and the marker (`setsid env -i ...`) counts too. Processes in the `exempt`
 * groups (idle background load the bench started) never count.
 */
export const liveMembers = ({ marker, groups = [], exempt = [], everywhere = false }) => {
  const ids = new Set(groups)
  const skip = new Set(exempt)
  const wide = everywhere && inBatchNamespace()
  const own = wide ? ownLine() : new Set([process.pid])
  return scan().filter((p) =>
    !own.has(p.pid) && !isGone(p) && !skip.has(p.pgid) &&
    (wide || ids.has(p.pgid) || ids.has(p.sid) || carries(p.pid, marker))
  )
}

/**
 * Starts `count` idle `sleep 1000`s under one `sh`, in a process group (and
 * session) of their own, and resolves once all are alive. `stop()` SIGKILLs
 * the group; whatever it misses dies with the batch's namespace.
 */
export const startIdle = async (count, timeoutMs = 60_000) => {
  const { spawn } = await import("node:child_process")
  const child = spawn("sh", ["-c", `i=0; while [ $i -lt ${count} ]; do sleep 1000 & i=$((i+1)); done; wait`], {
    detached: true,
    stdio: "ignore"
  })
  await new Promise((resolve, reject) => child.once("spawn", resolve).once("error", reject))
  const pgid = child.pid
  const alive = () => scan().filter((p) => p.pgid === pgid && !isGone(p)).length
  const stop = async () => {
    const deadline = performance.now() + 5000
    while (alive() > 0 && performance.now() < deadline) {
      signal(-pgid, "SIGKILL")
      await sleep(10)
    }
  }
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const live = alive()
    if (live >= count + 1) return { pgid, count, stop }
    if (performance.now() > deadline) {
      await stop()
      throw new Error(`only ${live} of ${count + 1} idle processes came up in ${timeoutMs} ms`)
    }
    await sleep(50)
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Polls until the workload has at least `count` live processes, `sleeps` of
 * them running `sleep` itself. A process that carries the marker has not
 * always exec'd its command yet: a fork, or a wrapper still joining its
 * cgroup (corral's, for one RCU grace period, 6-8 ms on these machines).
 * A stop scenario measures the stop of a workload that runs, so it waits
 * for its sleeps; a stop at once after the start is a race with the start.
 */
export const awaitMembers = async (target, count, timeoutMs = 10_000, sleeps = 0) => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const members = liveMembers(target)
    const live = members.length
    const running = members.filter((p) => p.comm === "sleep").length
    if (live >= count && running >= sleeps) return live
    if (performance.now() > deadline) {
      throw new Error(`workload reached only ${live} of ${count} processes (${running} of ${sleeps} sleeps running) in ${timeoutMs} ms`)
    }
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
