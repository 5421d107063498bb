import * as fs from "node:fs"
import type { ProcessInfo } from "../ProcessTable.js"
import { parseStat } from "./procStat.js"

export const available = (): boolean => process.platform === "linux" && fs.existsSync("/proc/self/stat")

// /proc files report a size of 0, so readFileSync allocates a 64 KiB buffer
// for every read; one reused buffer makes a scan cheaper and garbage-free.
const scratch = Buffer.allocUnsafe(4096)

/** The whole file, read into `scratch` (growing past it only for long files). */
const readProc = (path: string): string => {
  const fd = fs.openSync(path, "r")
  try {
    let length = fs.readSync(fd, scratch, 0, scratch.length, null)
    if (length < scratch.length) return scratch.toString("latin1", 0, length)
    const parts = [Buffer.from(scratch)]
    while ((length = fs.readSync(fd, scratch, 0, scratch.length, null)) > 0) parts.push(Buffer.from(scratch.subarray(0, length)))
    return Buffer.concat(parts).toString("latin1")
  } finally {
    fs.closeSync(fd)
  }
}

export const read = (pid: number): ProcessInfo | undefined => {
  try {
    return parseStat(readProc(`/proc/${pid}/stat`))
  } catch {
    return undefined
  }
}

// Synchronous reads: scanning 1000 pids this way costs ~20 ms, several times
// less than the same scan through the promise API.
export const scan = (): ReadonlyArray<ProcessInfo> => {
  const out: Array<ProcessInfo> = []
  const listed = new Set<number>()
  for (const name of fs.readdirSync("/proc")) {
    const c = name.charCodeAt(0)
    if (c < 48 || c > 57) continue
    listed.add(Number(name))
    const info = read(Number(name))
    if (info !== undefined) out.push(info)
  }
  // A process that forks its successor and exits every few ms is gone
  // before a walk reaches it. Its successor was born since the listing, so
  // read the pids handed out since, again and again until a round sees no
  // new birth: a member alive then was alive when its pid was read.
  let last = lastPid()
  let from = last - NEWEST
  for (let round = 0; round < MAX_ROUNDS && last > 0; round++) {
    for (let pid = Math.max(2, from + 1); pid <= last; pid++) {
      if (listed.has(pid)) continue
      listed.add(pid)
      const info = read(pid)
      if (info !== undefined) out.push(info)
    }
    const next = lastPid()
    if (next === last) break
    // after a wrap the newest pids start again from the bottom
    from = next < last ? next - NEWEST : last
    last = next
  }
  return out
}

/** How far below the newest pid the first round reads: births during the listing itself. */
const NEWEST = 256
const MAX_ROUNDS = 64

/** The pid handed out most recently in this PID namespace; 0 when unknown. */
const lastPid = (): number => {
  try {
    return Number(readProc("/proc/sys/kernel/ns_last_pid")) || 0
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

/** The shell ids a process carries: its own tag, and every outer one of a nested corral. */
export const shellIdsOf = (pid: number): ReadonlyArray<string> => {
  let env: string
  try {
    env = readProc(`/proc/${pid}/environ`)
  } catch {
    return []
  }
  const own = variable(env, TAG)
  const chain = variable(env, CHAIN)?.split(",").filter((id) => id !== "") ?? []
  return own === undefined || chain.includes(own) ? chain : [...chain, own]
}

/** The real uid, the first of the `Uid:` line of `/proc/<pid>/status`. */
export const uidOf = (pid: number): number | undefined => {
  try {
    const uid = /^Uid:\s+(\d+)/m.exec(readProc(`/proc/${pid}/status`))
    return uid === null ? undefined : Number(uid[1])
  } catch {
    return undefined
  }
}

// /proc/uptime and stat's starttime share the boot clock; USER_HZ is 100 on
// every Linux ABI Node supports.
export const now = (): number => Math.floor(Number(readProc("/proc/uptime").split(" ")[0]) * 100)

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
