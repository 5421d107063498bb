/**
 * cgroup v2 file operations. Synchronous: each is one or a few small reads
 * or writes on a kernel filesystem, cheaper than a trip through the event loop.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { withDescriptor } from "./descriptors.js"
import { readSmall } from "./readSmall.js"

/** The cgroup2 mount point, from `/proc/self/mountinfo` (pure v2, hybrid or elsewhere). */
export const mountPoint = (mountinfo = readOr("/proc/self/mountinfo")): string | undefined => {
  for (const line of mountinfo.split("\n")) {
    // fields: id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    const dash = line.indexOf(" - ")
    if (dash < 0 || !line.slice(dash + 3).startsWith("cgroup2 ")) continue
    const fields = line.slice(0, dash).split(" ")
    // a bind mount of a subtree (root other than /) does not show the whole hierarchy
    if (fields[3] === "/") return unescape(fields[4]!)
  }
  return undefined
}

/** This process's v2 cgroup, relative to the mount: the `0::` line of `/proc/self/cgroup`. */
export const ownPath = (procCgroup = readOr("/proc/self/cgroup")): string | undefined => {
  const line = procCgroup.split("\n").find((l) => l.startsWith("0::"))
  // " (deleted)" marks a cgroup removed under us: nothing can be created there
  return line === undefined || line.endsWith(" (deleted)") ? undefined : line.slice(3)
}

/** Reads a kernel file whole; "" where it cannot be read. */
export type Read = (file: string) => string

/** Pids of the cgroup itself, not of the cgroups below it: one read. Zombies have already left. */
export const ownProcs = (dir: string, read: Read = readOr): Array<number> => {
  const out: Array<number> = []
  for (const line of read(path.join(dir, "cgroup.procs")).split("\n")) if (line !== "" && line !== "0") out.push(Number(line))
  return out
}

/**
 * The cgroup and every cgroup below it, parents first. A shell's cell rarely
 * has any below it (a nested corral's), and its `cgroup.stat` says so in one
 * read, where listing the directory costs twice that.
 */
export const tree = (dir: string, read: Read = readOr): Array<string> =>
  hasDescendants(dir, read) ? [dir, ...subdirs(dir).flatMap((sub) => tree(sub, read))] : [dir]

/** Whether `cgroup.stat` counts a cgroup below this one; true when it cannot be read, so the directory is listed. */
const hasDescendants = (dir: string, read: Read): boolean => !/^nr_descendants 0$/m.test(read(path.join(dir, "cgroup.stat")))

/**
 * Puts `pid` in the cgroup, as its wrapper also does first thing; whichever
 * comes first, the leader is in once this returns, without waiting for the
 * wrapper to be scheduled. Falls back to waiting where the write fails (the
 * process already died, or only the wrapper may move itself).
 */
export const join = (dir: string, pid: number): boolean => {
  try {
    withDescriptor(() => fs.writeFileSync(path.join(dir, "cgroup.procs"), String(pid)))
    return true
  } catch {
    return awaitJoin(dir, pid)
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4))

/**
 * Waits (blocking, at most `maxMs`) until `pid` is in the cgroup, or has
 * died. The join is the wrapper's first instruction, so this is about a
 * millisecond; after it, nothing of the shell is outside its cgroup.
 */
const awaitJoin = (dir: string, pid: number, maxMs = 1_000): boolean => {
  // monotonic: this blocks, and a wall clock stepped back would hold it for the step
  const until = performance.now() + maxMs
  const stat = `/proc/${pid}/stat`
  while (performance.now() < until) {
    if (ownProcs(dir).includes(pid)) return true
    if (/^\S+ \(.*\) [ZX] /s.test(readOr(stat)) || readOr(stat) === "") return false
    Atomics.wait(pause, 0, 0, 0.2)
  }
  return false
}

/** Whether any live process is in the cgroup or below, as its `cgroup.events` says; undefined where that cannot be read. */
export const populatedOf = (dir: string, read: Read = readOr): boolean | undefined => {
  const events = read(path.join(dir, "cgroup.events"))
  return /^populated 1$/m.test(events) ? true : /^populated 0$/m.test(events) ? false : undefined
}

/** Whether any live process is in the cgroup or below; false once it is gone. */
export const populated = (dir: string, read: Read = readOr): boolean => populatedOf(dir, read) === true

/** Whether the cgroup says it holds no process, here or below: false where it cannot be read, unlike `!populated`. */
export const unpopulated = (dir: string, read: Read = readOr): boolean => populatedOf(dir, read) === false

/**
 * Calls `f` once `cgroup.events` says `populated 0`, read at each change the
 * kernel tells of through inotify (at most a few tenths of a millisecond
 * after the last member's exit here, where a poll sees it only at its next
 * read). A hint, never a promise: where the watch cannot be made, or a
 * kernel sends no event, `f` is never called. Returns what cancels it.
 */
export const onUnpopulated = (dir: string, f: () => void, read: Read = readOr): () => void => {
  let watcher: fs.FSWatcher | undefined
  const cancel = () => {
    watcher?.close()
    watcher = undefined
  }
  const check = () => {
    if (watcher === undefined || !unpopulated(dir, read)) return
    cancel()
    f()
  }
  try {
    // not persistent: a watch never keeps the process alive; no descriptor of the reserve for a hint
    watcher = fs.watch(path.join(dir, "cgroup.events"), { persistent: false }, check)
    watcher.on("error", cancel)
  } catch {
    return cancel
  }
  // it may have emptied before the watch began
  check()
  return cancel
}

/** SIGKILLs everything in the cgroup and below, atomically against forks. False where `cgroup.kill` is missing (Linux < 5.14). */
export const kill = (dir: string): boolean => {
  try {
    withDescriptor(() => fs.writeFileSync(path.join(dir, "cgroup.kill"), "1"))
    return true
  } catch {
    return false
  }
}

/**
 * Removes the cgroup and the (empty) cgroups below it, deepest first. Leaves
 * what is still populated. A shell's cgroup rarely has any below it, so it
 * is listed only when removing it alone is refused.
 */
export const remove = (dir: string): boolean => {
  const tried = rmdir(dir)
  if (tried !== "EBUSY" && tried !== "ENOTEMPTY") return tried === true || tried === "ENOENT"
  for (const child of subdirs(dir)) remove(child)
  return rmdir(dir) === true
}

const rmdir = (dir: string): true | string => {
  try {
    fs.rmdirSync(dir)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? "UNKNOWN"
  }
}

/**
 * Removes the empty cgroups of the tree made more than `minAgeMs` ago,
 * deepest first: a younger one may be a cell its owner is about to join.
 */
export const removeStale = (dir: string, minAgeMs: number, now = Date.now()): boolean => {
  try {
    // read first: removing a child makes the directory's mtime now
    const young = now - fs.statSync(dir).mtimeMs < minAgeMs
    for (const child of subdirs(dir)) removeStale(child, minAgeMs, now)
    if (young) return false
    fs.rmdirSync(dir)
    return true
  } catch {
    return false
  }
}

export const subdirs = (dir: string): Array<string> => {
  try {
    return withDescriptor(() => fs.readdirSync(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => path.join(dir, e.name))
  } catch {
    return []
  }
}

function readOr(file: string): string {
  try {
    return readSmall(file)
  } catch {
    return ""
  }
}

// mountinfo escapes space, tab, newline and backslash as octal
const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)))
