import * as fs from "node:fs"
import type { ProcessInfo } from "../ProcessTable.js"
import { withDescriptor } from "./descriptors.js"
import { fieldsAfterComm, parseStat } from "./procStat.js"
import { readSmall } from "./readSmall.js"
import type { PidMark as PidMarkSchema } from "./watcherMessage.js"

export const available = (): boolean => process.platform === "linux" && fs.existsSync("/proc/self/stat")

/** One process, or undefined when it is gone; `readFile` may be a kept file's read (see `makeKeptFiles`). */
export const read = (pid: number, readFile: (path: string) => string = readSmall): ProcessInfo | undefined => {
  try {
    return parseStat(readFile(`/proc/${pid}/stat`))
  } catch {
    return undefined
  }
}

/** Where the pid allocator stood (declared once, as the schema the watcher carries it in). See `scan`. */
export type PidMark = typeof PidMarkSchema.Type

export const mark = (): PidMark | undefined => {
  const lastPid = lastPidNow()
  const forks = forksNow()
  return lastPid > 0 && forks > 0 ? { lastPid, forks } : undefined
}

/**
 * Pids not handed out since `since`, once the allocator has reached `now`:
 * a process there is older than the mark. The allocator hands out pids in
 * a cycle; while fewer tasks were forked since than a cycle holds (counted
 * host-wide, so over-counted), it has not come back round to them.
 */
const olderThan = (since: PidMark | undefined): ((pid: number, now: number) => boolean) | undefined => {
  if (since === undefined) return undefined
  const max = readNumber("/proc/sys/kernel/pid_max")
  const forks = forksNow()
  if (max <= 0 || forks <= 0 || forks - since.forks >= max - RESERVED_PIDS) return undefined
  const { lastPid } = since
  // the cyclic interval (now, lastPid]
  return (pid, now) => now < lastPid ? pid > now && pid <= lastPid : pid > now || pid <= lastPid
}

/** The lowest pid the allocator hands out again after it wraps (the kernel's RESERVED_PIDS). */
const RESERVED_PIDS = 300

/**
 * Every process, or (`since`) every one that may have been born since that
 * mark: on a busy host most processes are older than a shell, and each
 * skipped one saves a read. Synchronous reads: scanning 1000 pids this way
 * costs ~20 ms, several times less than through the promise API.
 */
export const scan = (since?: PidMark): ReadonlyArray<ProcessInfo> => {
  const out: Array<ProcessInfo> = []
  const seen = new Set<number>()
  const older = olderThan(since)
  const visit = (pid: number, now: number) => {
    if (seen.has(pid)) return
    seen.add(pid)
    if (older?.(pid, now) === true) return
    const info = read(pid)
    if (info !== undefined) out.push(info)
  }
  let last = lastPidNow()
  // few pids handed out since the mark (none: no process born since): read
  // those, not a listing of /proc, which costs ~0.5 µs per process on the host
  const few = older !== undefined && last >= since!.lastPid && last - since!.lastPid <= PROBE_MAX
  if (!few) {
    const names = withDescriptor(() => fs.readdirSync("/proc"))
    // read after the listing, so everything listed was handed out by then
    last = lastPidNow()
    for (const name of names) {
      const c = name.charCodeAt(0)
      if (c >= 48 && c <= 57) visit(Number(name), last)
    }
  }
  // A process that forks its successor and exits every few ms is gone
  // before a walk reaches it. Its successor was born since the listing, so
  // read the pids handed out since, again and again until a round sees no
  // new birth: a member alive then was alive when its pid was read.
  let from = few ? since!.lastPid : last - NEWEST
  for (let round = 0; round < MAX_ROUNDS && last > 0; round++) {
    for (let pid = Math.max(2, from + 1); pid <= last; pid++) visit(pid, last)
    const next = lastPidNow()
    if (next === last) break
    // after a wrap the newest pids start again from the bottom
    from = next < last ? next - NEWEST : last
    last = next
  }
  return out
}

/** How many pids handed out since a mark are read one by one instead of listing /proc: a missing one costs ~11 µs to try. */
const PROBE_MAX = 64

/** How far below the newest pid the first round reads: births during the listing itself. */
const NEWEST = 256
const MAX_ROUNDS = 64

/** The pid handed out most recently in this PID namespace; 0 when unknown. */
const lastPidNow = (): number => readNumber("/proc/sys/kernel/ns_last_pid")

/** Tasks forked on the host since boot (`processes` in /proc/stat); 0 when unknown. */
const forksNow = (): number => {
  try {
    return Number(/^processes (\d+)$/m.exec(readSmall("/proc/stat"))?.[1] ?? 0)
  } catch {
    return 0
  }
}

const readNumber = (file: string): number => {
  try {
    return Number(readSmall(file)) || 0
  } catch {
    return 0
  }
}

const TAG = "CORRAL_SHELL_ID="
const CHAIN = "CORRAL_SHELL_IDS="

const variable = (env: string, name: string): string | undefined => {
  const at = env.startsWith(name) ? 0 : env.indexOf("\0" + name) + 1
  if (at <= 0 && !env.startsWith(name)) return undefined
  const from = at + name.length
  const end = env.indexOf("\0", from)
  return env.slice(from, end < 0 ? undefined : end)
}

/**
 * A reader of the shell ids a process carries: its own tag, and every outer
 * one of a nested corral. Called until it tells; undefined while it cannot,
 * the process being in an exec, where its environment reads empty for a
 * moment:
 * - between the kernel's swap of its memory and its placing the new
 *   environment there;
 * - when the read opened the memory the exec is letting go;
 * - while the kernel walks the new environment: it sets its end at its
 *   start first, and moves it past each variable.
 *
 * A `setsid` escaper read then, on its way to `sleep`, was taken for a
 * stranger one stop in eight. So an environment placed empty is taken for
 * one given empty (`env -i`) only once the process sleeps or is stopped, or
 * has run a millisecond since, far longer than that walk.
 */
export const shellIdsReader = (pid: number): () => ReadonlyArray<string> | undefined => {
  let sighted: Environment | undefined
  return () => {
    const env = environOf(pid)
    if (env !== "") return idsIn(env ?? "")
    const now = environmentOf(pid)
    if (now.state === "none" || (now.state === "empty" && givenEmpty(now, sighted))) return []
    if (now.state === "empty") sighted = sighted?.start === now.start ? sighted : now
    if (now.state !== "present") return undefined
    // written since the read, or the read's memory was an exec's old one: once more, and empty again is still an exec
    const again = environOf(pid)
    return again === "" ? undefined : idsIn(again ?? "")
  }
}

/** CPU time after which an environment that ends where it starts is the one given: the kernel walks a new one in microseconds. */
const SETTLED_RUN_NS = 1_000_000

const givenEmpty = (now: Environment, sighted: Environment | undefined): boolean =>
  now.waiting || (sighted?.start === now.start && now.ranNs - sighted.ranNs >= SETTLED_RUN_NS)

const environOf = (pid: number): string | undefined => {
  try {
    return readSmall(`/proc/${pid}/environ`)
  } catch {
    return undefined
  }
}

const idsIn = (env: string): ReadonlyArray<string> => {
  const own = variable(env, TAG)
  const chain = variable(env, CHAIN)?.split(",").filter((id) => id !== "") ?? []
  return own === undefined || chain.includes(own) ? chain : [...chain, own]
}

/** Kernel threads and exiting processes, which have no environment to read (`PF_KTHREAD`, `PF_EXITING`). */
const NO_ENVIRONMENT_FLAGS = 0x00200000 | 0x4

interface Environment {
  /**
   * "none" for a process that has none (a zombie, a kernel thread, one
   * exiting, or one gone), "coming" in an exec before the kernel has placed
   * it (`env_end`, field 51, is 0 then), "empty" where it ends at its start
   * (field 50), "present" otherwise.
   */
  readonly state: "none" | "coming" | "empty" | "present"
  readonly start: string
  /** Asleep or stopped: never so inside an exec, which sleeps only uninterruptibly. */
  readonly waiting: boolean
  /** Time on a CPU (`/proc/<pid>/schedstat`), NaN where unreadable. */
  readonly ranNs: number
}

const NO_ENVIRONMENT: Environment = { state: "none", start: "", waiting: false, ranNs: NaN }

/** A process's environment as its stat tells. */
const environmentOf = (pid: number): Environment => {
  let line: string
  try {
    line = readSmall(`/proc/${pid}/stat`)
  } catch {
    return NO_ENVIRONMENT
  }
  const rest = fieldsAfterComm(line)
  const status = rest[0]
  if (status === "Z" || status === "X" || (Number(rest[6]) & NO_ENVIRONMENT_FLAGS) !== 0) return NO_ENVIRONMENT
  const [start, end] = [rest[47], rest[48]]
  const state = end === "0" ? "coming" : end === start ? "empty" : "present"
  return { state, start, waiting: status === "S" || status === "T" || status === "t", ranNs: state === "empty" ? ranNsOf(pid) : NaN }
}

const ranNsOf = (pid: number): number => {
  try {
    return Number(readSmall(`/proc/${pid}/schedstat`).split(" ")[0])
  } catch {
    return NaN
  }
}

/** The real uid, the first of the `Uid:` line of `/proc/<pid>/status`. */
export const uidOf = (pid: number): number | undefined => {
  try {
    const uid = /^Uid:\s+(\d+)/m.exec(readSmall(`/proc/${pid}/status`))
    return uid === null ? undefined : Number(uid[1])
  } catch {
    return undefined
  }
}

// /proc/uptime and stat's starttime share the boot clock; USER_HZ is 100 on
// every Linux ABI Node supports.
export const now = (read: (path: string) => string = readSmall): number => Math.floor(Number(read("/proc/uptime").split(" ")[0]) * 100)

/** The inode in `/proc/<pid>/ns/pid` (or `pid_for_children`): `pid:[4026531836]`. */
export const pidNamespaceOf = (pid: number | "self", forChildren = false): number | undefined => {
  try {
    const link = fs.readlinkSync(`/proc/${pid}/ns/${forChildren ? "pid_for_children" : "pid"}`)
    const inode = Number(link.slice(link.indexOf("[") + 1, -1))
    return Number.isSafeInteger(inode) && inode > 0 ? inode : undefined
  } catch {
    return undefined
  }
}
