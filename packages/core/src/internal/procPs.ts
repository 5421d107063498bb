import { execFileSync } from "node:child_process"
import type { ProcessInfo } from "../ProcessTable.js"

// `etimes` (elapsed seconds) gives a start time on the same scale as `now`.
export const scan = (): ReadonlyArray<ProcessInfo> => {
  const out = execFileSync("ps", ["-A", "-o", "pid=,ppid=,pgid=,sess=,stat=,etimes=,comm="], { encoding: "utf8" })
  const at = Math.floor(Date.now() / 10)
  return out.split("\n").flatMap((line) => {
    const f = line.trim().split(/\s+/)
    if (f.length < 7) return []
    return [{
      pid: Number(f[0]),
      ppid: Number(f[1]),
      pgid: Number(f[2]),
      sid: Number(f[3]),
      state: f[4]!.charAt(0),
      threads: 1,
      startTime: at - Number(f[5]) * 100,
      comm: f.slice(6).join(" ")
    }]
  })
}

// etimes has one-second resolution, so "now" is taken one second early to keep
// every member of a group at or after the group's recorded start.
export const now = (): number => Math.floor(Date.now() / 10) - 100

/** The real uid of one process, or undefined once it is gone. */
export const uidOf = (pid: number): number | undefined => {
  try {
    const out = execFileSync("ps", ["-o", "ruid=", "-p", String(pid)], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    return /^\d+$/.test(out) ? Number(out) : undefined
  } catch {
    return undefined
  }
}
