/**
 * Who owns each process of a table scan, for the shells a stop finds by
 * scanning (procScan and pidns): by group, session, PID namespace or tag,
 * or as a descendant of a member, or in a session or group a member made.
 * It remembers every member it has seen (pid and start time), so a
 * descendant stays a member after its parent dies and it is reparented away.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StopTarget } from "../GroupStop.js"
import type { ProcessInfo, ProcessTable } from "../ProcessTable.js"
import { isGone } from "../ProcessTable.js"
import type { Group } from "./membership.js"

/** A member seen so far, by pid: a session or group it made is the shell's too. */
interface SeenLeader {
  readonly group: Group
  readonly startTime: number
}

/** Each process's start time, by pid, as one scan read them. */
type StartTimes = ReadonlyMap<number, number>

const key = (p: ProcessInfo) => `${p.pid}:${p.startTime}`

export class OwnerIndex {
  /** Whether any group is found by scanning: where none is, no scan is needed. */
  readonly scanned: boolean
  private readonly byShellId: ReadonlyMap<string, Group>
  private readonly bySession: ReadonlyMap<number, Group>
  private readonly byGroup: ReadonlyMap<number, Group>
  /** No member is older than the oldest shell. */
  private readonly oldest: number
  private readonly seen = new Map<string, Group>()
  private readonly leaders = new Map<number, SeenLeader>()
  private readonly tags = new Map<string, ReadonlyArray<string>>()
  private readonly namespaces = new Map<number, Group>()

  constructor(private readonly table: ProcessTable["Type"], private readonly groups: ReadonlyArray<Group>) {
    this.scanned = groups.length > 0
    this.byShellId = new Map(groups.flatMap((g) => (g.target.shellId ? [[g.target.shellId, g] as const] : [])))
    this.bySession = new Map(groups.map((g) => [g.target.sid, g]))
    this.byGroup = new Map(groups.map((g) => [g.target.pgid, g]))
    this.oldest = Math.min(...groups.map((g) => g.target.startTime))
  }

  /** Splits a scan into each scanned group's live members. */
  members(all: ReadonlyArray<ProcessInfo>): Effect.Effect<Map<Group, Array<ProcessInfo>>> {
    return Effect.gen(this, function*() {
      yield* this.resolveNamespaces()
      const owner = yield* this.owners(all)
      const out = new Map<Group, Array<ProcessInfo>>()
      for (const p of all) {
        const g = owner.get(p.pid)
        if (g === undefined || isGone(p)) continue
        this.seen.set(key(p), g)
        this.leaders.set(p.pid, { group: g, startTime: p.startTime })
        const list = out.get(g)
        if (list === undefined) out.set(g, [p])
        else list.push(p)
      }
      return out
    })
  }

  /** The namespaces of the PID-namespace shells, as soon as their leaders have made them. */
  private resolveNamespaces() {
    return Effect.forEach(this.groups, (g) => {
      if (!g.target.pidns || [...this.namespaces.values()].includes(g)) return Effect.void
      return Effect.map(namespaceOfLeader(this.table, g.target), Option.map((ns) => this.namespaces.set(ns, g)))
    }, { discard: true })
  }

  /**
   * Who owns each process: directly (group, session, namespace, tag), or as
   * a descendant or in a session or group a member made. What costs no read
   * goes first, to any depth: a process's namespace and tags are read only
   * where that found no owner. A fork bomb's thousand processes descend
   * from the shell's, and reading each one's environment first (its memory
   * map's lock, held while it forks or exits) took a stop from seconds to
   * over a minute before it sent its first signal.
   */
  private owners(all: ReadonlyArray<ProcessInfo>) {
    return Effect.gen(this, function*() {
      const owner = new Map<number, Group>()
      const now: StartTimes = new Map(all.map((p) => [p.pid, p.startTime]))
      const take = (p: ProcessInfo, g: Group | undefined) => {
        if (g === undefined || p.startTime < g.target.startTime) return false
        owner.set(p.pid, g)
        return true
      }
      const candidates = all.filter((p) => p.pid !== this.table.self && p.startTime >= this.oldest)
      const unread = growOwners(candidates.filter((p) => !take(p, this.ownerByStat(p, now))), owner, take)
      const unowned: Array<ProcessInfo> = []
      for (const p of unread) if (isGone(p) || !take(p, yield* this.ownerByReading(p))) unowned.push(p)
      growOwners(unowned, owner, take)
      return owner
    })
  }

  /** A process's owner by what its stat line says: its group or session, one a member made, or its having been seen. */
  private ownerByStat(p: ProcessInfo, now: StartTimes) {
    return this.seen.get(key(p)) ?? unlessTaken(this.bySession.get(p.sid), now) ?? unlessTaken(this.byGroup.get(p.pgid), now) ??
      (isGone(p) ? undefined : this.ledByMember(p, now))
  }

  /**
   * A session or group made by a member, even one that has died since. Its
   * id cannot name anyone else while this process is in it: the kernel
   * holds a pid for as long as a session or group of that id exists.
   */
  private ledByMember(p: ProcessInfo, now: StartTimes) {
    for (const id of [p.sid, p.pgid]) {
      const leader = this.leaders.get(id)
      const reused = now.has(id) && now.get(id) !== leader?.startTime
      if (leader !== undefined && !reused && p.startTime >= leader.startTime) return leader.group
    }
    return undefined
  }

  /** A process's owner by a file of its own: its PID namespace, then its tags. */
  private ownerByReading(p: ProcessInfo) {
    return Effect.gen(this, function*() {
      if (this.namespaces.size > 0) {
        const inNamespace = Option.flatMap(yield* this.table.pidNamespaceOf(p.pid), (ns) => Option.fromNullable(this.namespaces.get(ns)))
        if (Option.isSome(inNamespace)) return inNamespace.value
      }
      for (const id of this.byShellId.size === 0 ? [] : yield* this.tagsOf(p)) if (this.byShellId.has(id)) return this.byShellId.get(id)
      return undefined
    })
  }

  private tagsOf(p: ProcessInfo) {
    const known = this.tags.get(key(p))
    if (known !== undefined) return Effect.succeed(known)
    return Effect.tap(this.table.shellIdsOf(p.pid), (ids) => this.tags.set(key(p), ids))
  }
}

/**
 * Descendants, and the sessions and groups members made: members too; a
 * zombie still links its children (a hopper forks, then dies). Those of
 * `orphans` still without an owner.
 */
const growOwners = (
  orphans: ReadonlyArray<ProcessInfo>,
  owner: ReadonlyMap<number, Group>,
  take: (p: ProcessInfo, g: Group | undefined) => boolean
) => {
  for (let grew = true; grew;) {
    grew = false
    for (const p of orphans) if (!owner.has(p.pid) && take(p, owner.get(p.ppid) ?? owner.get(p.sid) ?? owner.get(p.pgid))) grew = true
  }
  return orphans.filter((p) => !owner.has(p.pid))
}

/**
 * A shell whose group and session ids are still its own: not when a process
 * of its leader's pid runs with a start time other than the leader's. The
 * kernel hands out a pid again only once no group or session holds it, so
 * that process's new group and session are another's.
 */
const unlessTaken = (g: Group | undefined, now: StartTimes) => {
  const started = g?.target.leaderStartTime
  return started !== undefined && now.has(g!.target.pgid) && now.get(g!.target.pgid) !== started ? undefined : g
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
    const own = yield* table.pidNamespaceOf(table.self)
    return Option.filter(ns, (inode) => !Option.contains(own, inode))
  })
