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

/**
 * Pids in /proc, newest (highest) first: under a PID 1 that never reaps,
 * hundreds of zombies can come before a short-lived process in a scan, and
 * read oldest first, a process living a few milliseconds (a pid hopper) is
 * gone by the time its turn comes.
 */
const pids = () => {
  const out = []
  for (const name of fs.readdirSync("/proc")) {
    const first = name.charCodeAt(0)
    if (first >= 48 && first <= 57) out.push(Number(name))
  }
  return out.sort((a, b) => b - a)
}

export const scan = () =>
  pids().flatMap((pid) => {
    const info = processInfo(pid)
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

/** Live processes of a shell: its session or group, anywhere carrying its tag, or marked with one of `tokens` (see liveMarked). */
export const liveMembers = ({ pid, tag }, tokens = []) => {
  const marked = new Set(liveMarked(tokens).map((p) => p.pid))
  return liveOthers().filter((p) =>
    p.sid === pid || p.pgid === pid || (tag !== undefined && shellIdOf(p.pid) === tag) || marked.has(p.pid)
  )
}

export const describe = (p) => `${p.pid} ${p.state} ${JSON.stringify(commandLine(p.pid) || p.comm)}`

/** describe, with the parent, group and session: for a hang, where who is matters. */
export const describeFully = (p) => `${p.pid} ${p.state} ppid ${p.ppid} pgid ${p.pgid} sid ${p.sid} ${JSON.stringify(commandLine(p.pid) || p.comm)}`

/**
 * Open descriptors, with libuv's inotify instance counted by its watches:
 * libuv makes that one descriptor at a loop's first `fs.watch` (a stop's
 * hint that a cell emptied) and keeps it for the loop's life, so it is no
 * leak, but a watch left behind is.
 */
export const openDescriptors = () =>
  fs.readdirSync("/proc/self/fd").reduce((count, fd) => {
    let target
    try {
      target = fs.readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      return count // closed since the listing (the listing's own descriptor among them)
    }
    if (target !== "anon_inode:inotify") return count + 1
    return count + (readText(`/proc/self/fdinfo/${fd}`) ?? "").split("\n").filter((line) => line.startsWith("inotify wd:")).length
  }, 0)

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

export const environ = (pid) => readText(`/proc/${pid}/environ`) ?? ""

/**
 * Live processes other than this one whose argv or environment holds one of
 * the tokens. A scenario puts a token in what it starts (`sleep 6<token>`,
 * an environment variable), so a process that left the session and the
 * group and stripped its environment (setsid env -i) is still found.
 */
export const liveMarked = (tokens, newerThan = 0) => {
  const list = [...tokens]
  if (list.length === 0) return []
  // each process's argv and environment read right after its stat, not after the whole table
  const found = []
  for (const pid of pids()) {
    // newest first: older pids are past iterations' zombies of the non-reaping runner (this namespace's pids never wrap)
    if (pid <= newerThan) break
    if (pid === process.pid) continue
    const p = processInfo(pid)
    if (p === undefined || !isAlive(p)) continue
    const cmd = readText(`/proc/${pid}/cmdline`) ?? ""
    const env = environ(pid)
    if (list.some((t) => cmd.includes(t) || env.includes(t))) found.push(p)
  }
  return found
}

/** The inode of this process's PID namespace. */
export const pidNamespace = () => Number(/\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))?.[1] ?? 0)

const cgroupHome = () => {
  const mount = (readText("/proc/self/mountinfo") ?? "").split("\n").map((l) => l.split(" - "))
    .find(([, rest]) => rest?.startsWith("cgroup2 "))?.[0]?.split(" ")
  const own = /^0::(.*)$/m.exec(readText("/proc/self/cgroup") ?? "")?.[1]
  if (mount === undefined || mount[3] !== "/" || own === undefined) return undefined
  return `${mount[4]}${own === "/" ? "" : own}`
}

const subdirs = (dir) => {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `${dir}/${e.name}`)
  } catch {
    return []
  }
}

/**
 * The cgroups corral's cgroup backend made for supervisors of this PID
 * namespace (`corral-<uid>-<pidns>-<pid>-...`), anywhere below this
 * process's cgroup. Each is removed when its supervisor's containment is
 * released: one still there is a leftover.
 */
export const corralCgroups = () => {
  const home = cgroupHome()
  if (home === undefined) return []
  const mine = new RegExp(`^corral-\\d+-${pidNamespace()}-`)
  const found = []
  const walk = (dir, depth) => {
    for (const sub of subdirs(dir)) {
      if (mine.test(sub.slice(sub.lastIndexOf("/") + 1))) found.push(sub)
      else if (depth < 8) walk(sub, depth + 1)
    }
  }
  walk(home, 0)
  return found
}

export const cgroupPopulated = (dir) => /^populated 1$/m.test(readText(`${dir}/cgroup.events`) ?? "")

/** Kills what is in the cgroup and removes it with the cgroups below it, deepest first. */
export const removeCgroup = (dir) => {
  try {
    fs.writeFileSync(`${dir}/cgroup.kill`, "1")
  } catch {
    // no cgroup.kill (Linux < 5.14) or already gone
  }
  const remove = (d) => {
    for (const sub of subdirs(d)) remove(sub)
    try {
      fs.rmdirSync(d)
    } catch {
      // still populated: the caller retries
    }
  }
  remove(dir)
  return !fs.existsSync(dir)
}
