/**
 * A PID-namespace shell as its stop's first look reads it from outside:
 * the pids its namespace's own /proc lists, and whom a signal to its
 * leader's group reached.
 */
import * as fs from "node:fs"
import type { Reached } from "../GroupStop.js"
import { withDescriptor } from "./descriptors.js"
import { statusIds } from "./procForeign.js"

/**
 * The pids, as the namespace numbers them, that the /proc `unshare
 * --mount-proc` mounted in it lists, reached through the root of `leader`
 * (`unshare`, which shares that mount namespace); undefined where it cannot
 * be read (the leader is gone, or this user may not look into it), and
 * until it is mounted: the leader's root shows our own /proc until then,
 * and a stop at once after a start, as nobody, took the host's 460
 * processes for the shell's.
 */
export const ownProcs = (leader: number): ReadonlyArray<number> | undefined => {
  try {
    const proc = `/proc/${leader}/root/proc`
    if (fs.statSync(proc).dev === ourProc()) return undefined
    const pids: Array<number> = []
    for (const name of withDescriptor(() => fs.readdirSync(proc))) {
      const pid = Number(name)
      if (Number.isInteger(pid) && pid > 0) pids.push(pid)
    }
    return pids
  } catch {
    return undefined
  }
}

/** The device of our own /proc: another mount of it (a namespace's) has one of its own. */
const ourProc = (): number => (ourProcDev ??= fs.statSync("/proc").dev)
let ourProcDev: number | undefined

/**
 * Whom a first signal to the leader's group reached: `leader` and the
 * processes its namespace listed (`inside`, by the namespace's numbering);
 * its size counts the command's alone.
 * A process read later is one of them if its pid in that namespace, the
 * second of its `NSpid` ids (the first is ours, where `/proc` is our own),
 * was listed: one read of its status, once. Its pids are the host's, so
 * none are assumed members.
 */
export const reached = (leader: number, inside: ReadonlyArray<number>): Reached => {
  const listed = new Set(inside)
  const known = new Map<number, boolean>([[leader, true]])
  return {
    // the command's processes: not the init (1 there), nor `unshare` outside (see `Membership.commandsOf`)
    size: inside.length - 1,
    has: (pid) => {
      let got = known.get(pid)
      if (got === undefined) {
        const inner = statusIds(pid, "NSpid")[1]
        got = inner !== undefined && listed.has(inner)
        known.set(pid, got)
      }
      return got
    },
    [Symbol.iterator]: () => [][Symbol.iterator]()
  }
}

/**
 * Whether `/proc` numbers processes as our namespace does and lists their
 * `NSpid` (Linux 4.1 on), so that `reached` can read whom a signal reached:
 * our own list is then our pid alone. Read once.
 */
export const readsNamespaceIds = (): boolean => (ownIds ??= statusIds(process.pid, "NSpid").join(" ") === String(process.pid))
let ownIds: boolean | undefined
