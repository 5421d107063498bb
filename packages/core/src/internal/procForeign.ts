/**
 * A `/proc` mounted for another PID namespace: what a process sees after
 * `unshare --pid --fork` without `--mount-proc`, where it is PID 1 of a new
 * namespace and `/proc/1` is the host's init. Read as usual, every pid would
 * name someone else. Each `/proc/<n>/status` also lists a process's ids in
 * every namespace it is in (`NSpid`, `NSpgid`, `NSsid`), ours included, so
 * the table is read through those: processes outside our namespace are left
 * out (those of namespaces nested in it too), and ids outside it read as 0.
 */
import * as fs from "node:fs"
import type { ProcessInfo } from "../ProcessTable.js"
import { withDescriptor } from "./descriptors.js"
import { parseStat } from "./procStat.js"

const ids = (status: string, key: string): ReadonlyArray<number> =>
  new RegExp(`^${key}:\\s+(.*)$`, "m").exec(status)?.[1]?.trim().split(/\s+/).map(Number) ?? []

/** A process's ids in each namespace from ours down (`NSpid`, `NSpgid`, ...), as `/proc` lists them; empty where it cannot be read. */
export const statusIds = (pid: number, key: string): ReadonlyArray<number> => ids(readOr(`/proc/${pid}/status`) ?? "", key)

const field = (status: string, key: string): string | undefined => new RegExp(`^${key}:\\s+(.*)$`, "m").exec(status)?.[1]

const readOr = (file: string): string | undefined => {
  try {
    return withDescriptor(() => fs.readFileSync(file, "latin1"))
  } catch {
    return undefined
  }
}

/**
 * Where `/proc` is another namespace's: how deep ours is in its `NSpid`
 * lists (our own list's last index). Undefined where `/proc` is our own, or
 * where the kernel lists no `NSpid` (before Linux 4.1: nothing to read through).
 */
export const ourLevel = (): number | undefined => {
  let self: string
  try {
    self = fs.readlinkSync("/proc/self")
  } catch {
    return undefined
  }
  if (self === String(process.pid)) return undefined
  const nspid = ids(readOr("/proc/self/status") ?? "", "NSpid")
  return nspid.at(-1) === process.pid ? nspid.length - 1 : undefined
}

/** A process as our namespace numbers it, and the `/proc` entry it is read from. */
interface Entry {
  readonly info: ProcessInfo
  readonly proc: number
}

const namespaceOf = (proc: number | "self"): string | undefined => {
  try {
    return fs.readlinkSync(`/proc/${proc}/ns/pid`)
  } catch {
    return undefined
  }
}

const readEntry = (proc: number, level: number, ourPidOf: (proc: number) => number, namespace: string): Entry | undefined => {
  const status = readOr(`/proc/${proc}/status`)
  const stat = readOr(`/proc/${proc}/stat`)
  if (status === undefined || stat === undefined) return undefined
  const nspid = ids(status, "NSpid")
  const parsed = parseStat(stat)
  // as deep as ours is not enough: a sibling namespace is as deep
  if (nspid.length !== level + 1 || parsed === undefined || namespaceOf(proc) !== namespace) return undefined
  return {
    proc,
    info: {
      ...parsed,
      pid: nspid[level]!,
      ppid: ourPidOf(Number(field(status, "PPid") ?? 0)),
      pgid: ids(status, "NSpgid")[level] ?? 0,
      sid: ids(status, "NSsid")[level] ?? 0
    }
  }
}

/** The table of our namespace, read through a `/proc` of another, `level` deep in its lists. */
export const make = (level: number) => {
  const namespace = namespaceOf("self") ?? ""
  let procOf = new Map<number, number>()
  const scanEntries = (): ReadonlyArray<Entry> => {
    const procs = withDescriptor(() => fs.readdirSync("/proc")).filter((name) => /^\d+$/.test(name)).map(Number)
    // a parent's id in our namespace, from its own NSpid: read once per scan
    const ours = new Map<number, number>()
    const ourPidOf = (proc: number): number => {
      if (proc <= 0) return 0
      if (!ours.has(proc)) ours.set(proc, ids(readOr(`/proc/${proc}/status`) ?? "", "NSpid")[level] ?? 0)
      return ours.get(proc)!
    }
    const entries = procs.flatMap((proc) => readEntry(proc, level, ourPidOf, namespace) ?? [])
    procOf = new Map(entries.map((e) => [e.info.pid, e.proc]))
    return entries
  }
  /** The `/proc` entry of our `pid`: from the last scan, checked, or found by a new one. */
  const procEntry = (pid: number): number | undefined => {
    const known = procOf.get(pid)
    if (known !== undefined && ids(readOr(`/proc/${known}/status`) ?? "", "NSpid")[level] === pid) return known
    return scanEntries().find((e) => e.info.pid === pid)?.proc
  }
  return {
    scan: (): ReadonlyArray<ProcessInfo> => scanEntries().map((e) => e.info),
    read: (pid: number): ProcessInfo | undefined => scanEntries().find((e) => e.info.pid === pid)?.info,
    /** `/proc/<pid>` as the caller would have named it, for the per-process files read as usual. */
    procEntry
  }
}
