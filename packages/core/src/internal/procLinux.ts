import * as fs from "node:fs"
import type { ProcessInfo } from "../ProcessTable.js"
import { parseStat } from "./procStat.js"

export const available = (): boolean => process.platform === "linux" && fs.existsSync("/proc/self/stat")

export const read = (pid: number): ProcessInfo | undefined => {
  try {
    return parseStat(fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    return undefined
  }
}

// Synchronous reads: scanning 1000 pids this way costs ~20 ms, several times
// less than the same scan through the promise API.
export const scan = (): ReadonlyArray<ProcessInfo> => {
  const out: Array<ProcessInfo> = []
  for (const name of fs.readdirSync("/proc")) {
    const c = name.charCodeAt(0)
    if (c < 48 || c > 57) continue
    const info = read(Number(name))
    if (info !== undefined) out.push(info)
  }
  return out
}

const TAG = "CORRAL_SHELL_ID="

export const shellIdOf = (pid: number): string | undefined => {
  let env: string
  try {
    env = fs.readFileSync(`/proc/${pid}/environ`, "latin1")
  } catch {
    return undefined
  }
  const at = env.startsWith(TAG) ? 0 : env.indexOf("\0" + TAG) + 1
  if (at <= 0 && !env.startsWith(TAG)) return undefined
  const from = at + TAG.length
  const end = env.indexOf("\0", from)
  return env.slice(from, end < 0 ? undefined : end)
}

// /proc/uptime and stat's starttime share the boot clock; USER_HZ is 100 on
// every Linux ABI Node supports.
export const now = (): number => Math.floor(Number(fs.readFileSync("/proc/uptime", "latin1").split(" ")[0]) * 100)
