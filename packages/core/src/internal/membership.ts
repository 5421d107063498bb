/**
 * Who belongs to a shell, and how a signal reaches all of them.
 *
 * - A cgroup target: the pids in its cgroup and below, which nothing can
 *   leave; the kill is `cgroup.kill`, atomic against forks, plus a per-pid
 *   SIGKILL for what it misses (a zombie leader whose threads still run).
 * - A PID-namespace target: scanned as below, and also every process in
 *   the namespace its leader (`unshare`) made, found by `/proc/<pid>/ns/pid`.
 *   Its kill needs no freeze: SIGKILL of the leader's group kills the
 *   namespace's init, and with it everything inside.
 * - A scanned target: the union of its process group, its session, the
 *   processes carrying its tag (`CORRAL_SHELL_ID` or any id in the
 *   `CORRAL_SHELL_IDS` chain of a nested corral) and the descendant tree seen
 *   so far. The kill freezes first: SIGSTOP to everything found, rescan until
 *   no new member runs (a stopped process cannot fork), then SIGKILL and
 *   SIGCONT. That beats pid hoppers a plain kill loop would chase forever.
 *
 * A process born before the target is never a member: its group or session
 * id is a recycled number, and signalling it would hit a stranger.
 */
import { constants } from "node:os"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StopTarget } from "../GroupStop.js"
import type { Backend } from "../GroupStop.js"
import type { ProcessInfo, Signal } from "../ProcessTable.js"
import { isGone, ProcessTable } from "../ProcessTable.js"
import * as Cgroup from "./cgroup.js"

/** The backend that held a target. */
export const backendOf = (target: StopTarget): Backend =>
  target.cgroup !== undefined ? "cgroup" : target.pidns ? "pidns" : "procScan"

/** Signals `unshare` blocks or does not die of: 0, INT, TERM, KILL (it dies, and the namespace with it: meant), CONT, STOP, and the default-ignored. */
const sparing: ReadonlySet<number> = new Set([
  0,
  ...(["SIGINT", "SIGTERM", "SIGKILL", "SIGCONT", "SIGSTOP", "SIGCHLD", "SIGWINCH", "SIGURG"] as const).map((s) => constants.signals[s])
])

/**
 * Whether a PID-namespace shell's leader, `unshare`, may get `signal` with
 * the rest of its group. Any other signal would kill it, and `--kill-child`
 * would then SIGKILL the namespace before the command could act on it.
 */
export const pidnsLeaderSurvives = (signal: Signal): boolean =>
  sparing.has(typeof signal === "number" ? signal : constants.signals[signal])

export type Live = ReadonlyArray<ReadonlyArray<ProcessInfo>>

type Tally = Record<"SIGTERM" | "SIGCONT" | "SIGKILL", number>

export interface Membership {
  /** Every member now, new ones included. */
  readonly scan: Effect.Effect<Live>
  /** Re-reads only the given members; one that died, or whose pid was reused, is dropped. */
  readonly recheck: (live: Live) => Effect.Effect<Live>
  /** Sends `signal` to every member: by group where the group is the shell's, else by pid. */
  readonly signal: (live: Live, signal: Signal) => Effect.Effect<void>
  /** Sends `signal` to each given member by pid, and to no one else. */
  readonly signalEach: (live: Live, signal: Signal) => Effect.Effect<void>
  /** SIGKILLs every member, frozen first where membership is not exact; returns whom it struck. */
  readonly kill: (live: Live) => Effect.Effect<Live>
  readonly tally: ReadonlyArray<Tally>
  readonly escaped: ReadonlyArray<Set<number>>
}

/** How often a cgroup that the kernel says is populated is read before an empty reading is believed. */
const MAX_CGROUP_READINGS = 100

/** How many freeze rounds a kill makes before it strikes what it holds. */
const MAX_FREEZE_ROUNDS = 20

export const make = (table: ProcessTable["Type"], targets: ReadonlyArray<StopTarget>): Membership => {
  const tally = targets.map((): Tally => ({ SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 }))
  const escaped = targets.map(() => new Set<number>())
  const scanned = targets.flatMap((t, i) => (t.cgroup === undefined ? [i] : []))
  const tree = makeTreeIndex(table, targets, scanned)

  const lookupLive = (pid: number) => Effect.map(table.lookup(pid), Option.filter((p) => !isGone(p)))

  const readLive = (pids: ReadonlyArray<number>) =>
    Effect.map(Effect.forEach(pids, lookupLive), Option.reduceCompact([] as Array<ProcessInfo>, (ps, p) => [...ps, p]))

  /**
   * A member listed may die before it is read, and the child it forked first
   * was not listed (a pid hopper): so the kernel's `populated` flag, not an
   * empty reading, says a cgroup is empty, and a reading that found no one
   * while it is set is taken again.
   */
  const cgroupMembers = (dir: string) =>
    Effect.gen(function*() {
      for (let reading = 0; reading < MAX_CGROUP_READINGS && Cgroup.populated(dir); reading++) {
        const found = yield* readLive(Cgroup.procs(dir))
        if (found.length > 0) return found
      }
      return []
    })

  const scan: Effect.Effect<Live> = Effect.gen(function*() {
    const byScan = scanned.length > 0 ? yield* tree.members(yield* table.scan) : new Map<number, Array<ProcessInfo>>()
    return yield* Effect.forEach(targets, (t, i) => (t.cgroup === undefined ? Effect.succeed(byScan.get(i) ?? []) : cgroupMembers(t.cgroup)))
  })

  const stillAlive = (p: ProcessInfo) => Effect.map(lookupLive(p.pid), Option.exists((now) => now.startTime === p.startTime))
  const recheck = (live: Live) => Effect.forEach(live, (ps) => Effect.filter(ps, stillAlive))

  const send = (i: number, target: number, signal: Signal) =>
    Effect.map(table.signal(target, signal), (accepted) => {
      if (accepted && signal in tally[i]!) tally[i]![signal as keyof Tally] += 1
    })

  /**
   * The shell's own groups get one group signal each; anyone else (an
   * escaper) is signalled by pid, and so is every member but `unshare` when
   * the signal would kill that leader of a PID namespace.
   */
  const signalTarget = (i: number, members: ReadonlyArray<ProcessInfo>, signal: Signal) =>
    Effect.gen(function*() {
      const target = targets[i]!
      const groups = new Set<number>()
      const aroundLeader = target.pidns === true && !pidnsLeaderSurvives(signal)
      for (const p of members) {
        const own = p.sid === target.sid || p.pgid === target.pgid
        if (!own) escaped[i]!.add(p.pid)
        if (own && !aroundLeader) groups.add(p.pgid)
        else if (p.pid !== target.pgid) yield* send(i, p.pid, signal)
      }
      for (const pgid of groups) yield* send(i, -pgid, signal)
    })

  const signal = (live: Live, sig: Signal) => Effect.forEach(live, (ps, i) => signalTarget(i, ps, sig), { discard: true })

  const signalEach = (live: Live, sig: Signal) =>
    Effect.forEach(live, (ps, i) => Effect.forEach(ps, (p) => send(i, p.pid, sig), { discard: true }), { discard: true })

  // only a plain scan needs freezing: a cgroup or a namespace is killed whole
  const scannedOnly = (live: Live): Live => live.map((ps, i) => (backendOf(targets[i]!) === "procScan" ? ps : []))

  /** SIGSTOP what is known, rescan, repeat until a scan finds no new member still running. */
  const freeze = (live: Live) =>
    Effect.gen(function*() {
      let held = live
      let stopping = scannedOnly(live)
      for (let round = 0; round < MAX_FREEZE_ROUNDS && stopping.some((ps) => ps.length > 0); round++) {
        yield* signal(stopping, "SIGSTOP")
        const now = yield* scan
        stopping = scannedOnly(now.map((ps, i) => ps.filter((p) => !isStopped(p) && !has(held[i]!, p))))
        held = now.map((ps, i) => union(held[i]!, ps))
      }
      return held
    })

  let frozen = false
  /**
   * The first kill freezes scanned shells, strikes everything held, then
   * continues it, so nothing SIGKILL could not reach is left stopped; later
   * rounds strike what is left.
   */
  const kill = (live: Live) =>
    Effect.gen(function*() {
      targets.forEach((t, i) => t.cgroup !== undefined && live[i]!.length > 0 && Cgroup.kill(t.cgroup))
      const held = frozen ? live : yield* freeze(live)
      yield* signal(held, "SIGKILL")
      if (!frozen) yield* signal(scannedOnly(held), "SIGCONT")
      frozen = true
      return held
    })

  return { scan, recheck, signal, signalEach, kill, tally, escaped }
}

const isStopped = (p: ProcessInfo) => p.state === "T" || p.state === "t"

const has = (ps: ReadonlyArray<ProcessInfo>, p: ProcessInfo) => ps.some((q) => q.pid === p.pid && q.startTime === p.startTime)

const union = (a: ReadonlyArray<ProcessInfo>, b: ReadonlyArray<ProcessInfo>) => {
  const seen = new Set(a.map((p) => `${p.pid}:${p.startTime}`))
  return [...a, ...b.filter((p) => !seen.has(`${p.pid}:${p.startTime}`))]
}

/**
 * Splits a table scan into each scanned target's members. Remembers every
 * member it has seen (pid and start time), so a descendant stays a member
 * after its parent dies and it is reparented away.
 */
const makeTreeIndex = (table: ProcessTable["Type"], targets: ReadonlyArray<StopTarget>, scanned: ReadonlyArray<number>) => {
  const byShellId = new Map(scanned.flatMap((i) => (targets[i]!.shellId ? [[targets[i]!.shellId!, i] as const] : [])))
  const bySession = new Map(scanned.map((i) => [targets[i]!.sid, i]))
  const byGroup = new Map(scanned.map((i) => [targets[i]!.pgid, i]))
  const oldest = Math.min(...scanned.map((i) => targets[i]!.startTime))
  const seen = new Map<string, number>()
  // members seen so far, by pid: a session or group one of them made is the shell's too
  const leaders = new Map<number, { readonly i: number; readonly startTime: number }>()
  const tags = new Map<string, ReadonlyArray<string>>()
  const namespaces = new Map<number, number>()
  const resolveNamespaces = Effect.forEach(scanned, (i) => {
    const t = targets[i]!
    if (!t.pidns || [...namespaces.values()].includes(i)) return Effect.void
    return Effect.map(namespaceOfLeader(table, t), Option.map((ns) => namespaces.set(ns, i)))
  }, { discard: true })
  const key = (p: ProcessInfo) => `${p.pid}:${p.startTime}`
  const tagsOf = (p: ProcessInfo) => {
    const known = tags.get(key(p))
    if (known !== undefined) return Effect.succeed(known)
    return Effect.tap(table.shellIdsOf(p.pid), (ids) => tags.set(key(p), ids))
  }
  /**
   * A session or group made by a member, even one that has died since. Its
   * id cannot name anyone else while this process is in it: the kernel
   * holds a pid for as long as a session or group of that id exists.
   */
  const ledByMember = (p: ProcessInfo, now: ReadonlyMap<number, number>) => {
    for (const id of [p.sid, p.pgid]) {
      const leader = leaders.get(id)
      const reused = now.has(id) && now.get(id) !== leader?.startTime
      if (leader !== undefined && !reused && p.startTime >= leader.startTime) return leader.i
    }
    return undefined
  }
  const ownerOf = (p: ProcessInfo, now: ReadonlyMap<number, number>) =>
    Effect.gen(function*() {
      const direct = seen.get(key(p)) ?? bySession.get(p.sid) ?? byGroup.get(p.pgid) ?? ledByMember(p, now)
      if (direct !== undefined) return direct
      if (namespaces.size > 0) {
        const inNamespace = Option.flatMap(yield* table.pidNamespaceOf(p.pid), (ns) => Option.fromNullable(namespaces.get(ns)))
        if (Option.isSome(inNamespace)) return inNamespace.value
      }
      for (const id of byShellId.size === 0 ? [] : yield* tagsOf(p)) if (byShellId.has(id)) return byShellId.get(id)
      return undefined
    })

  const members = (all: ReadonlyArray<ProcessInfo>) =>
    Effect.gen(function*() {
      yield* resolveNamespaces
      const out = new Map<number, Array<ProcessInfo>>()
      const owner = new Map<number, number>()
      const orphans: Array<ProcessInfo> = []
      const now = new Map(all.map((p) => [p.pid, p.startTime]))
      // a zombie still links its children to the shell: a hopper forks, then dies
      for (const p of all) {
        if (p.pid === process.pid || p.startTime < oldest) continue
        const i = isGone(p) ? seen.get(key(p)) ?? bySession.get(p.sid) ?? byGroup.get(p.pgid) : yield* ownerOf(p, now)
        if (i !== undefined && p.startTime >= targets[i]!.startTime) owner.set(p.pid, i)
        else orphans.push(p)
      }
      // descendants, and the sessions and groups members made: members too, to any depth
      for (let grew = true; grew;) {
        grew = false
        for (const p of orphans) {
          const i = owner.get(p.ppid) ?? owner.get(p.sid) ?? owner.get(p.pgid)
          if (i !== undefined && !owner.has(p.pid) && p.startTime >= targets[i]!.startTime) {
            owner.set(p.pid, i)
            grew = true
          }
        }
      }
      for (const p of all) {
        const i = owner.get(p.pid)
        if (i === undefined || isGone(p)) continue
        seen.set(key(p), i)
        leaders.set(p.pid, { i, startTime: p.startTime })
        const list = out.get(i)
        if (list === undefined) out.set(i, [p])
        else list.push(p)
      }
      return out
    })
  return { members }
}

/**
 * The namespace a PID-namespace target's leader made: the `pid_for_children`
 * of `unshare`, once it has unshared. Never our own namespace (not yet
 * unshared, or a recycled pid), which would make every process a member.
 */
const namespaceOfLeader = (table: ProcessTable["Type"], target: StopTarget) =>
  Effect.gen(function*() {
    const leader = yield* table.lookup(target.pgid)
    if (!Option.exists(leader, (p) => p.startTime >= target.startTime && p.comm === "unshare" && !isGone(p))) return Option.none()
    const ns = yield* table.pidNamespaceOf(target.pgid, true)
    const own = yield* table.pidNamespaceOf(process.pid)
    return Option.filter(ns, (inode) => !Option.contains(own, inode))
  })

