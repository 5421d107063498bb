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
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StopTarget } from "../GroupStop.js"
import type { Backend } from "../GroupStop.js"
import type { KeptLookups, ProcessInfo, Signal } from "../ProcessTable.js"
import type { PidMark } from "./procLinux.js"
import { isGone, ProcessTable } from "../ProcessTable.js"
import * as Cgroup from "./cgroup.js"
import * as Pidns from "./pidns.js"
import { makeKeptFiles } from "./readSmall.js"
import { OwnerIndex } from "./scanOwners.js"

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

/** Signals sent, by name: those a stop report counts. */
export type Tally = Record<"SIGTERM" | "SIGCONT" | "SIGKILL", number>

/** Counts a signal the kernel accepted, if it is one the tally names. */
export const countSent = (tally: Tally, signal: Signal) => {
  if (typeof signal === "string" && signal in tally) tally[signal as keyof Tally] += 1
}

/** One group under a stop: its target, its members as last found, and what was sent to it. */
export interface Group {
  readonly target: StopTarget
  /** Its live members when last looked at (after a kill: whom the kill struck). */
  live: ReadonlyArray<ProcessInfo>
  /** Signals the kernel accepted, by name. */
  readonly sent: Tally
  /** Pids that had left the session, signalled by pid. */
  readonly escaped: Set<number>
  /**
   * Pids a cgroup listed when the first signal went to the target's group
   * at once, held as that group's without being read (see `resolve`): an
   * obedient member dies before it is worth three syscalls.
   */
  readonly assumed: Set<number>
  /** How many of the command's processes (see `commandsOf`) the last kill struck. */
  struck: number
}

export interface Membership {
  /** One per target, in the targets' order. */
  readonly groups: ReadonlyArray<Group>
  /** Finds every group's members now, new ones included. */
  readonly scan: Effect.Effect<void>
  /** Finds the members born since the last scan: for when every member that scan found is gone (see `recheck`). */
  readonly scanNewborn: Effect.Effect<void>
  /**
   * Re-reads only the members each group has; one that died, or whose pid
   * was reused, is dropped. After a kill, a cell's members are all dropped
   * at once, when its cgroup empties.
   */
  readonly recheck: Effect.Effect<void>
  /** Sends `signal` to every member of `only` (default: every group): by group where the group is the shell's, else by pid. */
  readonly signal: (signal: Signal, only?: ReadonlyArray<Group>) => Effect.Effect<void>
  /** Sends `signal` to the given members of `group` by pid, and to no one else. */
  readonly signalEach: (group: Group, members: ReadonlyArray<ProcessInfo>, signal: Signal) => Effect.Effect<void>
  /** SIGKILLs every member, frozen first where membership is not exact; each group's `live` is then whom it struck. */
  readonly kill: Effect.Effect<void>
  /**
   * Reads the assumed members of `group` still alive, if its target's group
   * is empty (they are the ones outside it) or `now`: each is then known as
   * it is, in the target's group (the first signal reached it) or not.
   */
  readonly resolve: (group: Group, now: boolean) => Effect.Effect<ReadonlyArray<ProcessInfo>>
  /** Closes the files the membership kept open to read again. */
  readonly release: Effect.Effect<void>
}

/** How often a cgroup that the kernel says is populated is read before those it last listed are assumed to be members. */
const MAX_CGROUP_READINGS = 100

/** How many cgroup files a stop keeps open to read again: two per shell (its listing and its events) for most stops. */
const MAX_KEPT_FILES = 64

/** How many freeze rounds a kill makes before it strikes what it holds. */
const MAX_FREEZE_ROUNDS = 20

/** Members by group, for the steps of a kill. */
type Found = ReadonlyMap<Group, ReadonlyArray<ProcessInfo>>

/**
 * A membership of `targets`; what it keeps open goes with its `release`.
 * `reached`: by group id, the pids a cgroup listed when its group got the
 * first signal at once (`GroupStop.signalAtOnce`); they start out assumed.
 */
export const make = (
  table: ProcessTable["Type"],
  targets: ReadonlyArray<StopTarget>,
  reached: ReadonlyMap<number, Iterable<number>> = new Map()
): Effect.Effect<Membership> => Effect.map(table.keptLookups, (kept) => new Members(table, kept, targets, reached))

class Members implements Membership {
  readonly groups: ReadonlyArray<Group>
  readonly scan: Effect.Effect<void>
  readonly scanNewborn: Effect.Effect<void>
  readonly recheck: Effect.Effect<void>
  readonly kill: Effect.Effect<void>
  readonly release: Effect.Effect<void>
  private readonly table: ProcessTable["Type"]
  private readonly kept: KeptLookups
  private readonly owners: OwnerIndex
  private readonly signals: Signals
  /** The mark of the shell spawned first, if every scanned one has one: no member is older. */
  private readonly since: PidMark | undefined
  /** Where the pid allocator stood when the last scan began: a process born since has a pid handed out after it. */
  private lastScan: PidMark | undefined
  /** Each cgroup's tree as its last full reading found it: a recheck reads those listings without listing directories again. */
  private readonly trees = new Map<string, ReadonlyArray<string>>()
  /** A stop reads a cgroup's listing and events again and again: kept open, each read is one syscall, not three. */
  private readonly files = makeKeptFiles(MAX_KEPT_FILES)
  /**
   * Groups struck whole: a cell `cgroup.kill` struck, or a PID namespace
   * whose init got SIGKILL (see `namespaceInit`). Each of its members is
   * dying and none can be born, so whether any is left is one small read:
   * the cell's events, or the init's state. Reading a thousand dying
   * members at every check took more CPU than the kill, CPU their exits
   * were waiting for.
   */
  private readonly struckWhole = new Set<Group>()

  constructor(
    table: ProcessTable["Type"],
    kept: KeptLookups,
    targets: ReadonlyArray<StopTarget>,
    reached: ReadonlyMap<number, Iterable<number>>
  ) {
    this.table = table
    this.kept = kept
    this.groups = targets.map((target) => newGroup(target, reached))
    const scanned = this.groups.filter((g) => g.target.cgroup === undefined)
    this.owners = new OwnerIndex(table, scanned)
    this.since = earliestMark(scanned)
    this.signals = makeSignals(table)
    const find = this.findFrom(() => this.since)
    this.scan = Effect.map(find, (found) => this.groups.forEach((g) => (g.live = found.get(g) ?? [])))
    this.scanNewborn = Effect.map(this.findFrom(() => this.lastScan ?? this.since), (found) => this.addNewborn(found))
    this.recheck = Effect.forEach(this.groups, (g) => this.recheckGroup(g), { discard: true })
    this.kill = makeKill(this.groups, find, this.signals.toFound, (g, cgroup) => this.relist(g, cgroup), this.struckWhole)
    this.release = Effect.zipRight(Effect.sync(this.files.close), kept.close)
  }

  readonly signal = (sig: Signal, only: ReadonlyArray<Group> = this.groups) =>
    this.signals.toFound(new Map(only.map((g) => [g, g.live])), sig)

  readonly signalEach = (group: Group, members: ReadonlyArray<ProcessInfo>, sig: Signal) => this.signals.each(group, members, sig)

  readonly resolve = (g: Group, now: boolean): Effect.Effect<ReadonlyArray<ProcessInfo>> =>
    Effect.gen(this, function*() {
      const pending = g.live.filter((p) => g.assumed.has(p.pid))
      if (pending.length === 0) return []
      // a signal of 0 to a group that still has a process is accepted
      if (!now && (yield* this.table.signal(-g.target.pgid, 0))) return []
      pending.forEach((p) => g.assumed.delete(p.pid))
      const resolved = yield* this.readLive(pending.map((p) => p.pid))
      const byPid = new Map(resolved.map((p) => [p.pid, p]))
      const wasPending = new Set(pending)
      g.live = g.live.flatMap((p) => !wasPending.has(p) ? [p] : byPid.has(p.pid) ? [byPid.get(p.pid)!] : [])
      return resolved
    })

  /** Every group's members: scanned ones from a scan of the table since `from()`, the others from their cells. */
  private findFrom(from: () => PidMark | undefined): Effect.Effect<Found> {
    return Effect.gen(this, function*() {
      const byScan = this.owners.scanned ? yield* this.owners.members(yield* this.scanTable(from())) : new Map<Group, Array<ProcessInfo>>()
      const found = new Map<Group, ReadonlyArray<ProcessInfo>>()
      for (const g of this.groups) found.set(g, g.target.cgroup === undefined ? byScan.get(g) ?? [] : yield* this.cgroupMembers(g, g.target.cgroup))
      return found
    })
  }

  private scanTable(from: PidMark | undefined) {
    return Effect.gen(this, function*() {
      const mark = yield* this.table.mark
      const all = yield* (from === undefined ? this.table.scan : this.table.scanSince(from))
      this.lastScan = mark
      return all
    })
  }

  /**
   * Every member alive at the last scan was found by it (a process is a
   * member by its own group, session, tag or namespace, or by a parent
   * that was): so once those are gone, only a process born since can be
   * one, and where the allocator has handed out no pid since, there is none.
   * Those still known (procScan's init, which adopts the newborns) stay.
   */
  private addNewborn(found: Found) {
    for (const g of this.groups) {
      const born = (found.get(g) ?? []).filter((p) => !g.live.some((q) => q.pid === p.pid))
      g.live = [...g.live, ...born]
    }
  }

  /**
   * A member listed may die before it is read, and the child it forked first
   * was not listed (a pid hopper): so the kernel's `populated` flag, not an
   * empty reading, says a cgroup is empty, and a reading that found no one
   * while it is set is taken again. Nor is a cell whose events cannot be
   * read taken for empty: whom it was known to hold stands. One still
   * populated after every reading holds members no reading could find (gone
   * before each read, or hidden from the table): those last listed are
   * assumed, so the stop goes on, strikes the cell and says so.
   */
  private cgroupMembers(g: Group, dir: string) {
    return Effect.gen(this, function*() {
      const read = this.files.readOr
      let listed: ReadonlyArray<number> = []
      for (let reading = 0; reading < MAX_CGROUP_READINGS; reading++) {
        const populated = Cgroup.populatedOf(dir, read)
        if (populated === undefined) return g.live.length > 0 ? g.live : [...g.assumed].map((pid) => assumedMember(g.target, pid))
        if (!populated) return []
        const tree = Cgroup.tree(dir, read)
        this.trees.set(dir, tree)
        const pids = tree.flatMap((cgroup) => Cgroup.ownProcs(cgroup, read))
        const found = [
          ...pids.filter((pid) => g.assumed.has(pid)).map((pid) => assumedMember(g.target, pid)),
          ...yield* this.readLive(pids.filter((pid) => !g.assumed.has(pid)))
        ]
        if (found.length > 0) return found
        listed = pids
      }
      listed.forEach((pid) => g.assumed.add(pid))
      return listed.map((pid) => assumedMember(g.target, pid))
    })
  }

  private readLive(pids: ReadonlyArray<number>) {
    return Effect.map(
      Effect.forEach(pids, (pid) => Effect.map(this.table.lookup(pid), Option.filter((p) => !isGone(p)))),
      Arr.getSomes
    )
  }

  private recheckGroup(g: Group): Effect.Effect<void> {
    const { cgroup } = g.target
    // none known: nothing to read (a stop of many groups rechecks the ones that have not emptied yet)
    if (g.live.length === 0) return Effect.void
    const readEach = Effect.map(Effect.filter(g.live, this.stillAlive), (live) => void (g.live = live))
    const init = cgroup === undefined && this.struckWhole.has(g) ? namespaceInit(g) : undefined
    // the kernel reaps a namespace's last process before its init becomes a zombie: while the init lives, so may
    // the others; once it is gone, they are read to make sure, as any scanned member is
    if (init !== undefined) return Effect.flatMap(this.stillAlive(init), (alive) => alive ? Effect.void : readEach)
    if (cgroup === undefined) return readEach
    if (!this.struckWhole.has(g)) return Effect.sync(() => this.relist(g, cgroup))
    // a cell reads empty once its last member has left it, a moment before that member is done exiting:
    // those struck are looked at once it is empty, and the few still exiting at the next check
    return Cgroup.unpopulated(cgroup, this.files.readOr)
      ? Effect.map(Effect.filter(g.live, this.stillExiting), (live) => void (g.live = live))
      : Effect.void
  }

  /** A recheck reads the same members again: through files kept open. */
  private readonly stillAlive = (p: ProcessInfo) =>
    Effect.map(this.kept.lookup(p.pid), Option.exists((now) => !isGone(now) && now.startTime === p.startTime))

  /** A member struck, and no longer in its cell: one a signal 0 no longer finds (reaped) needs no read of its /proc. */
  private readonly stillExiting = (p: ProcessInfo) =>
    Effect.flatMap(this.table.signal(p.pid, 0), (found) => found ? this.stillAlive(p) : Effect.succeed(false))

  /** A cgroup's listing holds only its live members, ours whoever they are: one read for all of them, not one per member. */
  private relist(g: Group, cgroup: string) {
    // a known member is in a cgroup the last full reading listed (or gone with it); one unreadable leaves them all known
    const listings = (this.trees.get(cgroup) ?? Cgroup.tree(cgroup, this.files.readOr)).map((dir) => this.listingOf(dir))
    if (listings.includes(undefined)) return
    const present = new Set(listings.flat())
    g.live = g.live.filter((p) => present.has(p.pid))
  }

  /** A cgroup's own pids; none for one removed; undefined where it cannot be read. */
  private listingOf(dir: string): ReadonlyArray<number> | undefined {
    try {
      return Cgroup.ownProcs(dir, this.files.read)
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "ENOENT" ? [] : undefined
    }
  }
}

/** A group as its stop begins: nothing found or sent yet; a cgroup's pids the first signal reached are assumed members. */
const newGroup = (target: StopTarget, reached: ReadonlyMap<number, Iterable<number>>): Group => ({
  target,
  live: [],
  sent: { SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 },
  escaped: new Set(),
  assumed: new Set(target.cgroup === undefined ? [] : reached.get(target.pgid) ?? []),
  struck: 0
})

/** An assumed member: in the target's group and session, as far as the stop is concerned, until it is read. */
const assumedMember = (target: StopTarget, pid: number): ProcessInfo => ({
  pid,
  ppid: 0,
  pgid: target.pgid,
  sid: target.sid,
  state: "?",
  threads: 1,
  startTime: target.startTime,
  comm: ""
})

/** The mark of the shell spawned first, if every one has one: no member of any of them is older. */
const earliestMark = (groups: ReadonlyArray<Group>) => {
  const marks = groups.map((g) => g.target.pidMark)
  if (marks.length === 0 || marks.some((m) => m === undefined)) return undefined
  return marks.reduce((a, b) => (b!.forks < a!.forks ? b : a))
}

/** Signals to members, each counted on its group when the kernel accepted it. */
type Signals = ReturnType<typeof makeSignals>

const makeSignals = (table: ProcessTable["Type"]) => {
  const send = (group: Group, target: number, signal: Signal) =>
    Effect.map(table.signal(target, signal), (accepted) => {
      if (accepted) countSent(group.sent, signal)
      return accepted
    })

  /** Sends `signal` by pid to `p` if that pid is still the process read, not one freed and handed out since. */
  const sendIfSame = (group: Group, p: ProcessInfo, signal: Signal) =>
    Effect.flatMap(table.lookup(p.pid), (now) => {
      if (Option.isNone(now) || now.value.startTime !== p.startTime || isGone(now.value)) return Effect.void
      const { target } = group
      if (now.value.sid !== target.sid && now.value.pgid !== target.pgid) group.escaped.add(p.pid)
      return send(group, p.pid, signal)
    })

  /**
   * The shell's own groups get one group signal each, and so does a group
   * in a session a member leads (every process there descends from that
   * leader: a member too). Anyone else (an escaper whose session's leader
   * is gone) is signalled by pid, and so is every member but `unshare` when
   * the signal would kill that leader of a PID namespace. A `setsid` fork
   * bomb of 1600 processes in one group took 0.5-2 s to signal by pid.
   */
  const toGroup = (group: Group, members: ReadonlyArray<ProcessInfo>, signal: Signal) =>
    Effect.gen(function*() {
      const { target } = group
      const pgids = new Set<number>()
      const aroundLeader = target.pidns === true && !pidnsLeaderSurvives(signal)
      const ledSessions = new Set(members.filter((p) => p.sid === p.pid).map((p) => p.sid))
      for (const p of members) {
        const own = p.sid === target.sid || p.pgid === target.pgid
        if (!own) group.escaped.add(p.pid)
        // a group id of 0 or 1 is one the table never signals: such a member is signalled by pid
        if (own ? !aroundLeader : ledSessions.has(p.sid) && p.pgid > 1) pgids.add(p.pgid)
        else if (p.pid !== target.pgid) yield* send(group, p.pid, signal)
      }
      for (const pgid of pgids) {
        if (yield* send(group, -pgid, signal)) continue
        // no such group: whoever was read in it has left it since (a `setsid` just after the read), and gets it by pid
        for (const p of members) if (p.pgid === pgid) yield* sendIfSame(group, p, signal)
      }
    })

  return {
    toFound: (found: Found, sig: Signal) => Effect.forEach(found, ([g, ps]) => toGroup(g, ps, sig), { discard: true }),
    each: (group: Group, members: ReadonlyArray<ProcessInfo>, sig: Signal) =>
      Effect.forEach(members, (p) => {
        if (p.sid !== group.target.sid && p.pgid !== group.target.pgid) group.escaped.add(p.pid)
        return send(group, p.pid, sig)
      }, { discard: true })
  }
}

/**
 * The kill: the first freezes scanned shells, strikes everything held, then
 * continues it, so nothing SIGKILL could not reach is left stopped; later
 * rounds strike what is left. Each group's `live` is then whom it struck.
 */
const makeKill = (
  groups: ReadonlyArray<Group>,
  find: Effect.Effect<Found>,
  signal: (found: Found, sig: Signal) => Effect.Effect<void>,
  relist: (g: Group, cgroup: string) => void,
  struckWhole: Set<Group>
) => {
  // only a plain scan needs freezing: a cgroup or a namespace is killed whole
  const scannedOnly = (found: Found): Found => new Map([...found].filter(([g]) => backendOf(g.target) === "procScan"))
  const anyIn = (found: Found) => [...found.values()].some((ps) => ps.length > 0)
  /** What SIGKILL goes to: of a namespace struck whole, its leader's group alone (its init among them), not each member by pid. */
  const toStrike = (held: Found, whole: ReadonlyArray<Group>): Found =>
    new Map([...held].map(([g, ps]) => [g, whole.includes(g) && g.target.pidns ? ps.filter((p) => p.pgid === g.target.pgid) : ps]))

  /** SIGSTOP what is known, rescan, repeat until a scan finds no new member still running. */
  const freeze = (live: Found) =>
    Effect.gen(function*() {
      let held = live
      let stopping = scannedOnly(live)
      for (let round = 0; round < MAX_FREEZE_ROUNDS && anyIn(stopping); round++) {
        yield* signal(stopping, "SIGSTOP")
        const now = yield* find
        stopping = scannedOnly(new Map([...now].map(([g, ps]) => [g, ps.filter((p) => !isStopped(p) && !has(held.get(g) ?? [], p))])))
        held = new Map([...now].map(([g, ps]) => [g, heldNow(held.get(g) ?? [], ps)]))
      }
      return held
    })

  let frozen = false
  return Effect.gen(function*() {
    // a cell struck whole has nothing a later round could reach: each member is dying, none can be born
    const striking = groups.filter((g) => !struckWhole.has(g))
    const whole: Array<Group> = []
    for (const g of striking) {
      if (g.live.length === 0) continue
      if (g.target.cgroup === undefined) {
        if (namespaceInit(g) !== undefined) whole.push(g)
        continue
      }
      // listed just before the kill: whom it strikes, by pid where they left the group, and not a pid freed since
      relist(g, g.target.cgroup)
      if (Cgroup.kill(g.target.cgroup)) whole.push(g)
    }
    const live: Found = new Map(striking.map((g) => [g, g.live]))
    const held = frozen ? live : yield* freeze(live)
    // counted before the kill: a namespace's own /proc empties as it dies
    const inNamespace = new Map(whole.flatMap((g) => g.target.pidns ? [[g, namespaceStruck(g)] as const] : []))
    // a cell by group and by pid too, for what `cgroup.kill` misses (a zombie leader whose threads still run)
    yield* signal(toStrike(held, whole), "SIGKILL")
    if (!frozen) yield* signal(scannedOnly(held), "SIGCONT")
    frozen = true
    striking.forEach((g) => (g.live = held.get(g) ?? []))
    striking.forEach((g) => (g.struck = inNamespace.get(g) ?? commandsOf(g).length))
    whole.forEach((g) => struckWhole.add(g))
  })
}

const isStopped = (p: ProcessInfo) => p.state === "T" || p.state === "t"

/**
 * The init of a PID-namespace shell's namespace, among its live members:
 * the child `unshare` (the leader) forked into it, still in the leader's
 * group. Its death ends the namespace: the kernel SIGKILLs every process
 * in it, forks there fail from then on, and it becomes a zombie only once
 * all the others are gone. So a group SIGKILL that reaches it kills every
 * member, however many sessions they made, in one syscall; a stop of a
 * fork bomb of 1600 processes spent 0.5-1 s sending them SIGKILL one by one.
 */
const namespaceInit = (g: Group): ProcessInfo | undefined =>
  g.target.pidns === true
    ? g.live.find((p) => p.ppid === g.target.pgid && p.pgid === g.target.pgid && p.pid !== g.target.pgid && !isGone(p))
    : undefined

/**
 * The live members that are the command's own: of a PID-namespace shell,
 * not `unshare` (its leader) nor the namespace's init, and of a procScan
 * shell not its init (the leader), which corral put there and which end on
 * their own once the command's processes have. So a
 * shell counts the same processes under every backend: a pidns command
 * that exited with nothing left behind is not lingering in its machinery.
 */
export const commandsOf = (g: Group): ReadonlyArray<ProcessInfo> => {
  if (g.target.reaper === true) return g.live.filter((p) => p.pid !== g.target.pgid)
  if (g.target.pidns !== true) return g.live
  const init = namespaceInit(g)
  return g.live.filter((p) => p.pid !== g.target.pgid && p !== init)
}

/**
 * How many of the command's processes a namespace held when its init was
 * struck: those its own /proc lists, less the init. The members a stop
 * knows of there may be only `unshare` and the init, which every newborn
 * of a hopper outlives.
 */
const namespaceStruck = (g: Group) => Math.max(0, (Pidns.ownProcs(g.target.pgid)?.length ?? commandsOf(g).length + 1) - 1)

const has = (ps: ReadonlyArray<ProcessInfo>, p: ProcessInfo) => ps.some((q) => q.pid === p.pid && q.startTime === p.startTime)

/**
 * Those `now` found, as read now, and those of `before` it did not find: a
 * member that left its group since it was first read is signalled in its
 * new one. Held as first read, a `setsid` escaper read just before its
 * `setsid` got every SIGKILL at the group it had left, and outlived the stop.
 */
const heldNow = (before: ReadonlyArray<ProcessInfo>, now: ReadonlyArray<ProcessInfo>) => {
  const seen = new Set(now.map((p) => `${p.pid}:${p.startTime}`))
  return [...now, ...before.filter((p) => !seen.has(`${p.pid}:${p.startTime}`))]
}
