// The soak's own reading of /proc. It shares no code with corral's ProcessTable,
// so corral is never the judge of what it left behind.
import * as fs from "node:fs"

const readText = (path) => {
  try {
    return fs.readFileSync(path, "latin1")
  } catch {
    return undefined
  }
}

/** One process from `/proc/<pid>/stat`, counting fields from the last ")" (names may hold spaces and parentheses). */
export const processInfo = (pid) => {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  const nameEnd = stat.lastIndexOf(")")
  const fields = stat.slice(nameEnd + 2).split(" ")
  return {
    pid,
    comm: stat.slice(stat.indexOf("(") + 1, nameEnd),
    state: fields[0],
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
    sid: Number(fields[3]),
    cpuTicks: Number(fields[11]) + Number(fields[12]),
    threads: Number(fields[17])
  }
}

export const scan = () =>
  fs.readdirSync("/proc").flatMap((name) => {
    const first = name.charCodeAt(0)
    if (first < 48 || first > 57) return []
    const info = processInfo(Number(name))
    return info === undefined ? [] : [info]
  })

/** A zombie whose other threads still run is alive; a lone zombie only holds a table slot. */
export const isAlive = (p) => !((p.state === "Z" || p.state === "X") && p.threads <= 1)

export const isZombie = (p) => !isAlive(p)

export const shellIdOf = (pid) => {
  const environ = readText(`/proc/${pid}/environ`) ?? ""
  const entry = environ.split("\0").find((kv) => kv.startsWith("CORRAL_SHELL_ID="))
  return entry?.slice("CORRAL_SHELL_ID=".length)
}

export const commandLine = (pid) => (readText(`/proc/${pid}/cmdline`) ?? "").split("\0").join(" ").trim()

/** Live processes other than this one. */
export const liveOthers = () => scan().filter((p) => p.pid !== process.pid && isAlive(p))

/** Live processes of a shell: its session or group, or anywhere carrying its tag. */
export const liveMembers = ({ pid, tag }) =>
  liveOthers().filter((p) => p.sid === pid || p.pgid === pid || (tag !== undefined && shellIdOf(p.pid) === tag))

export const describe = (p) => `${p.pid} ${p.state} ${JSON.stringify(commandLine(p.pid) || p.comm)}`

export const openDescriptors = () => fs.readdirSync("/proc/self/fd").length

const statusField = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, "m").exec(readText("/proc/self/status") ?? "")?.[1] ?? 0) * 1024

/** Peak resident set since the last `resetPeakRss` (VmHWM), in bytes. */
export const peakRss = () => statusField("VmHWM")

/** Restarts the peak (VmHWM) at the current resident set; false where the kernel does not allow it. */
export const resetPeakRss = () => {
  try {
    fs.writeFileSync("/proc/self/clear_refs", "5")
    return true
  } catch {
    return false
  }
}
