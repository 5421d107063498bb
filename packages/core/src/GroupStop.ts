/**
 * The stop: the stop signal (SIGTERM unless told) and SIGCONT to every
 * member, a zombie-aware wait for the shell to empty, then a bounded kill loop. Who the members are, and how a
 * kill reaches all of them, is the membership's business (a cgroup, or a
 * process-table scan); the sequence is the same for both. Many shells stop
 * together with one process-table scan per tick.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import type { LimitsShape } from "./Limits.js"
import { Limits } from "./Limits.js"
import type { ContainmentBackend } from "./Shell.js"
import type { StopTarget as StopTargetSchema } from "./internal/watcherMessage.js"
import type { Group, Membership } from "./internal/membership.js"
import type { ProcessInfo, Signal } from "./ProcessTable.js"
import { afterIoDue } from "./internal/macrotask.js"
import * as Monotonic from "./internal/monotonic.js"
import * as MembershipImpl from "./internal/membership.js"
import { ProcessTable } from "./ProcessTable.js"

/** What identifies a shell corral started, and guards against PID reuse: declared once, as the schema the watcher carries it in. */
export type StopTarget = typeof StopTargetSchema.Type

export type Backend = typeof ContainmentBackend.Type

// membership decides these, so they live beside it; they are part of the stop's surface all the same
export { backendOf, pidnsLeaderSurvives } from "./internal/membership.js"
import { backendOf } from "./internal/membership.js"

/** How one group's stop went: declared once, as a schema, in Shell.ts. */
export type { StopReport } from "./Shell.js"
import type { StopReport } from "./Shell.js"

export interface StopOptions {
  readonly grace?: Duration.DurationInput | undefined
  /** The first signal, sent to every member before the grace (default SIGTERM), as `timeout -s`. */
  readonly signal?: Signal | undefined
  /**
   * Events after which the group may have emptied (the leader's exit, its
   * pipes closing). Each one ends the current pause early, once.
   */
  readonly wakeOn?: ReadonlyArray<Effect.Effect<void>> | undefined
  /**
   * Events that tell the group has likely emptied (its cgroup's
   * `populated 0`): each ends the current pause early, but none is waited
   * for, as a kernel may never send it; the pauses stay as without them.
   */
  readonly hints?: ReadonlyArray<Effect.Effect<void>> | undefined
  /** Groups `signalAtOnce` already reached, by group id: their members then are not signalled again. */
  readonly sentAtOnce?: SentAtOnce | undefined
  /** When the stop began (the Clock's monotonic millis, see `internal/monotonic`), if before this call: as when `signalAtOnce` sent the first signal. The grace and each report's duration run from then. */
  readonly began?: number | undefined
}

/**
 * Whom a first signal sent at once (`signalAtOnce`) reached: how many, and
 * whether a process read later was one of them. Iterated, the pids a
 * cgroup listed then, which the stop assumes are members until it reads
 * them; none where the cell lists processes as another namespace numbers
 * them, or where a scan read them (procScan's init). A set of pids is one.
 */
export interface Reached extends Iterable<number> {
  readonly size: number
  readonly has: (pid: number) => boolean
}

/** Whom `signalAtOnce` reached, by group id. */
export type SentAtOnce = ReadonlyMap<number, Reached>

/**
 * The first signal and SIGCONT to a target's own group, before the stop
 * proper scans anything, so the command is already going while the stop
 * looks for the rest. Only for a caller that holds the group's leader
 * unreaped: then no other process can have taken its id. `reached`, read
 * from the cell just before (a cgroup's listing, a namespace's own /proc),
 * says who got it; with no one there, nothing is sent.
 */
export const signalAtOnce = (
  table: ProcessTable["Type"],
  target: StopTarget,
  signal: Signal,
  reached: Reached
): Effect.Effect<Reached | undefined> =>
  reached.size === 0 ? Effect.succeed(undefined) : Effect.flatMap(table.signal(-target.pgid, signal), (accepted) =>
    accepted ? Effect.as(table.signal(-target.pgid, "SIGCONT"), reached) : Effect.succeed(undefined))

/** The longest wait a Node timer takes: a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** A group `signalAtOnce` reached: whom, and how to learn that its stop is over. */
export interface ReachedGroup {
  readonly target: StopTarget
  readonly reached: Reached
  /** Calls back once, at the leader's exit (a namespace's command's); returns what cancels that. */
  readonly onLeaderExit: (f: () => void) => () => void
  /** Whether the group's cgroup says it holds no process any more (`populated 0`); false where it cannot be read. */
  readonly emptied: () => boolean
  /** Whether the target's process group still has a process (signal 0, which sends nothing; a zombie counts): false once it is gone. */
  readonly groupAlive: Effect.Effect<boolean>
  /** How many processes the cgroup itself lists (zombies have left it). */
  readonly listed: () => number
  /** Done once every holder of the group's output pipes has closed them: its members that kept them are gone. */
  readonly closed: Effect.Effect<void>
  /**
   * Where the cell tells when it empties (a cgroup's `populated 0`, an
   * init's own exit): calls back then (at once if it is empty already), and
   * returns what cancels that. A hint, never a promise (see
   * `Cgroup.onUnpopulated`). The look waits for it, not reading the cell
   * meanwhile, once the leader has gone before its members; later, it ends
   * the look's pauses early (`hintOf`).
   */
  readonly onUnpopulated?: OnUnpopulated | undefined
}

/** Registers a callback for a cell's word that it emptied; returns what cancels it. */
export type OnUnpopulated = (f: () => void) => () => void

/** A cell's word that it emptied, as a hint for a stop's pauses (`StopOptions.hints`): never done where the cell gives none. */
export const hintOf = (onUnpopulated: OnUnpopulated | undefined): Effect.Effect<void> =>
  onUnpopulated === undefined
    ? Effect.never
    : Effect.async<void>((resume) => Effect.sync(onUnpopulated(() => resume(Effect.void))))

/**
 * The first look at groups `signalAtOnce` reached: one read of each
 * cgroup's `populated` at once (the signals went out first; of many
 * groups, the first ones are often gone by then; the file was opened at
 * the start, see `ProcessGroup`'s joiner), another at its leader's exit, then more
 * while its members are dying of the signal (`lookWhileDying`). A group
 * found empty has its report (`done`) then. One that is not dying any
 * more, yet not empty, is left to the stop proper: what is left is outside
 * its process group (an escaper, which did not get the signal), or
 * outlives the signal. The look ends when no group is left to look at, or
 * `resolveAfter` into the grace, as a stop reads the members it assumed
 * reached; the rest then get the stop proper, whose grace has run from the
 * signal all the same. An obedient command's stop thus ends without a
 * fiber of its own or a scan: a group of 50 `sleep`s looked at by the stop
 * proper's scans took three times the CPU of opencode's `kill(-pgid, 0)`
 * loop, from the processes that were ending.
 */
export const firstLook = (
  groups: ReadonlyArray<ReachedGroup>,
  { began, first, grace }: { readonly first: Signal; readonly began: number; readonly grace: number },
  done: (index: number, report: StopReport) => void
): Effect.Effect<void> =>
  Effect.clockWith((clock) => {
    const age = () => Monotonic.unsafeMillis(clock) - began
    const settled = (i: number) => {
      if (!groups[i]!.emptied()) return false
      done(i, emptiedReport(groups[i]!, first, age()))
      return true
    }
    const waiting = groups.flatMap((_, i) => settled(i) ? [] : [i])
    const until = resolveAfter(grace)
    return waiting.length === 0 ? Effect.void : Effect.flatMap(
      awaitLeaders(groups, waiting, until - age(), settled, age),
      // none left dying: each found empty at its leader's exit (the usual end) or at its cell's word, or the look is over
      (dying) => dying.length === 0 ? Effect.void : lookWhileDying(groups, dying, until, age, settled)
    )
  })

/**
 * Waits until the leaders of `waiting` have exited, or for `wait` ms;
 * reads each group at its leader's exit. A group not empty then, whose cell
 * tells when it empties, is waited on further (`awaitEmptied`). The groups
 * left dying, for `lookWhileDying`.
 */
const awaitLeaders = (
  groups: ReadonlyArray<ReachedGroup>,
  waiting: ReadonlyArray<number>,
  wait: number,
  settled: (i: number) => boolean,
  age: () => number
) =>
  Effect.async<ReadonlyArray<Dying>>((resume) => {
    const dying: Array<Dying> = []
    let left = waiting.length
    const cancels: Array<() => void> = []
    const end = () => {
      cancelDeadline?.()
      cancels.forEach((cancel) => cancel())
    }
    const leave = (found: Dying | undefined) => {
      if (found !== undefined) dying.push(found)
      if (--left > 0) return
      end()
      resume(Effect.succeed(dying))
    }
    // a grace too long for a timer (an infinite one) leaves the look to the leaders' exits
    const cancelDeadline = wait > MAX_TIMER_MS ? undefined : afterIoDue(Math.max(0, wait), () => {
      end()
      resume(Effect.succeed([]))
    })
    for (const i of waiting) {
      cancels.push(groups[i]!.onLeaderExit(() => {
        if (settled(i)) return leave(undefined)
        const found: Dying = { index: i, listed: -1, changedAt: 0 }
        const onUnpopulated = groups[i]!.onUnpopulated
        if (onUnpopulated === undefined) return leave(found)
        cancels.push(awaitEmptied(groups[i]!, found, onUnpopulated, age, () => leave(settled(i) ? undefined : found)))
      }))
    }
    return Effect.sync(end)
  })

/**
 * A group whose leader has gone before its members, in a cell that tells
 * when it empties: its members are most likely dying of the signal. The
 * look leaves them the CPU: it reads the cell's listing once, then waits
 * for the cell's word, or `MIN_PAUSE_AWAITING_EVENT_MS`, without a fiber,
 * and calls `next`. Checking at once, then pausing, took a group of 50
 * dying `sleep`s 0.9-1.1 ms longer to stop under cgroup (ADR 63): fibers
 * and reads at the leader's exit, in the CPU the dying processes needed. A group whose
 * listing has not changed by then (an escaper holds it) is found steady at
 * the look's first check, as it was at its second before. Returns what
 * cancels the wait.
 */
const awaitEmptied = (
  group: ReachedGroup,
  found: Dying,
  onUnpopulated: OnUnpopulated,
  age: () => number,
  next: () => void
): (() => void) => {
  found.listed = group.listed()
  found.changedAt = age()
  let over = false
  let cancelHint: (() => void) | undefined
  const cancel = () => {
    over = true
    cancelTimer()
    cancelHint?.()
  }
  const finish = () => {
    if (over) return
    cancel()
    next()
  }
  const cancelTimer = afterIoDue(MIN_PAUSE_AWAITING_EVENT_MS, finish)
  // it may call back before it returns, where the cell has emptied already
  cancelHint = onUnpopulated(finish)
  if (over) cancelHint()
  return cancel
}

/** A group whose leader has exited: how many its cell listed when last read, and when that number last changed (ms into the stop). */
interface Dying {
  readonly index: number
  listed: number
  changedAt: number
}

/**
 * Reads each group again, until `until` ms into the stop, while it is
 * dying: its process group lives on (signal 0), and its cell's listing
 * changed within `STEADY_MS` (where PID 1 keeps zombies, a dead member
 * keeps its group's id in use). Read at once when its pipes close (the
 * members that held them are gone then), and at pauses as the stop
 * proper's (see `pauseAt`), which catch members that closed them.
 */
const lookWhileDying = (
  groups: ReadonlyArray<ReachedGroup>,
  exited: ReadonlyArray<Dying>,
  until: number,
  age: () => number,
  settled: (i: number) => boolean
) =>
  Effect.suspend(() => {
    const wake = makeWake(exited.map(({ index }) => groups[index]!.closed), age, exited.map(({ index }) => hintOf(groups[index]!.onUnpopulated)))
    const stillDying = (group: Dying) =>
      settled(group.index) ? Effect.succeed(false) : Effect.map(groups[group.index]!.groupAlive, (alive) => {
        const listed = groups[group.index]!.listed()
        if (listed !== group.listed) {
          group.listed = listed
          group.changedAt = age()
        }
        return alive && age() - group.changedAt < STEADY_MS
      })
    const look = Effect.gen(function*() {
      let dying = exited
      while (dying.length > 0 && age() < until) {
        dying = yield* Effect.filter(dying, stillDying)
        if (dying.length === 0) return
        yield* wake.pause(Math.min(until - age(), pauseAt(wake, age())))
      }
    })
    return Effect.ensuring(look, wake.close)
  })

/** The report of a group its first signal emptied: all it got was that signal and SIGCONT. */
const emptiedReport = ({ reached, target }: ReachedGroup, first: Signal, durationMs: number): StopReport => {
  const signals: MembershipImpl.Tally = { SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 }
  for (const signal of [first, "SIGCONT" as const]) MembershipImpl.countSent(signals, signal)
  return {
    pgid: target.pgid,
    containment: backendOf(target),
    signals,
    escalated: false,
    killed: 0,
    durationMs,
    members: reached.size,
    survivors: [],
    escaped: []
  }
}

export const stopGroup = (target: StopTarget, options?: StopOptions) =>
  Effect.map(stopGroups([target], options), (reports) => reports[0]!)

/** One group's stop as it goes: its members as the membership finds them, and what its report is made of. */
interface Progress {
  readonly group: Group
  /** The command's live members when the stop began (see `commandsOf`). */
  readonly members: number
  /** Members that got the first signal: any other found later gets it then. */
  readonly signalled: Set<string>
  /** The most members the kill loop struck at once. */
  killed: number
  /** When the group was last seen empty, after being seen with members; undefined while it has some. */
  emptiedAt: number | undefined
  /** How many live members the last check found, and how far into the grace that number last changed. */
  lastLive: number
  changedAt: number
}

/** The longest pause between two checks of a stop. */
const MAX_PAUSE_MS = 10

/**
 * How long into the grace an assumed member is read at the soonest while
 * its group lives on; a quarter of the grace where that is longer (see
 * `resolveAfter`), the whole grace where that is shorter.
 */
const MIN_RESOLVE_AFTER_MS = 20

/** The shortest pause while a wake event is still to come. */
const MIN_PAUSE_AWAITING_EVENT_MS = 5

/** The longest pause while a wake event is still to come. */
const MAX_PAUSE_AWAITING_EVENT_MS = 50

/** What every step of one stop works with. */
interface Run {
  readonly membership: Membership
  readonly progress: ReadonlyArray<Progress>
  readonly wake: Wake
  readonly first: Signal
  /** How long into the grace assumed members are read (`resolveSurvivors`). */
  readonly resolveAfter: number
}

export const stopGroups = Effect.fn("GroupStop.stopGroups")(function*(
  targets: ReadonlyArray<StopTarget>,
  options?: StopOptions
) {
  return yield* makeStop(yield* ProcessTable, yield* Limits)(targets, options)
})

/**
 * `stopGroups` over services given once: how a containment stops its shells,
 * without providing or looking up a service, or opening a span, at each
 * stop. After a moment idle, each of those cost a stop 0.2-0.4 ms before its
 * first check, in a separate process per batch of stops, as a program stops
 * its shells (a span is the dearest: its clock reads and fiber refs).
 */
export const makeStop = (table: ProcessTable["Type"], limits: LimitsShape) =>
(
  targets: ReadonlyArray<StopTarget>,
  options?: StopOptions
): Effect.Effect<ReadonlyArray<StopReport>> =>
  Effect.acquireUseRelease(
    MembershipImpl.make(table, targets, options?.sentAtOnce),
    (membership) => stopMembers(membership, limits, options),
    (membership) => membership.release
  )

/** The stop's sequence, over the members as `membership` finds them. */
const stopMembers = (membership: Membership, limits: LimitsShape, options: StopOptions | undefined) =>
  Effect.clockWith((clock) => {
    const wake = makeWake(options?.wakeOn ?? [], () => Monotonic.unsafeMillis(clock), options?.hints)
    return Effect.ensuring(stopWith(membership, limits, wake, options), wake.close)
  })

const stopWith = (membership: Membership, limits: LimitsShape, wake: Wake, options: StopOptions | undefined) =>
  Effect.gen(function*() {
    const began = options?.began ?? (yield* Monotonic.millis)
    yield* membership.scan
    const atOnce = options?.sentAtOnce ?? new Map<number, ReadonlySet<number>>()
    const first = options?.signal ?? "SIGTERM"
    const grace = Duration.toMillis(options?.grace ?? limits.grace)
    const run: Run = {
      membership,
      progress: membership.groups.map((group) => progressOf(group, atOnce.get(group.target.pgid), first, began)),
      wake,
      first,
      resolveAfter: resolveAfter(grace)
    }
    // a group reached at once gets nothing more by group: its other members are newcomers, signalled each;
    // nor does one where only a namespace's `unshare` and init are left: they end by themselves, and ignore it
    const byGroup = membership.groups.filter((g) => !atOnce.has(g.target.pgid) && MembershipImpl.commandsOf(g).length > 0)
    if (byGroup.length > 0) {
      yield* membership.signal(run.first, byGroup)
      yield* membership.signal("SIGCONT", byGroup)
    }
    yield* signalNewcomers(run)
    yield* pollUntilEmpty(run, began + grace, signalNewcomers, began, resolveSurvivors)
    for (const p of run.progress) p.killed = MembershipImpl.commandsOf(p.group).length
    yield* killUntilEmpty(run, (yield* Monotonic.millis) + Duration.toMillis(limits.killTimeout), limits)
    if (isAnyAlive(run)) yield* membership.scan
    const finished = yield* Monotonic.millis
    return run.progress.map(({ emptiedAt, group, killed, members }): StopReport => ({
      pgid: group.target.pgid,
      containment: backendOf(group.target),
      signals: { ...group.sent },
      escalated: killed > 0,
      killed,
      durationMs: (group.live.length > 0 ? finished : emptiedAt ?? finished) - began,
      members,
      survivors: group.live.map((p) => p.pid),
      escaped: [...group.escaped]
    }))
  })

/** A group's progress as its stop begins; `reached`: whom `signalAtOnce` signalled in its group. */
const progressOf = (group: Group, reached: Reached | undefined, first: Signal, began: number): Progress => {
  // an assumed member is neither signalled nor a newcomer until it is read (`resolveSurvivors`)
  const gotIt = reached === undefined
    ? group.live
    : group.live.filter((p) => reached.has(p.pid) && p.pgid === group.target.pgid && !group.assumed.has(p.pid))
  if (reached !== undefined) [first, "SIGCONT" as const].forEach((signal) => MembershipImpl.countSent(group.sent, signal))
  const live = group.live.length
  return {
    group,
    members: reached === undefined ? MembershipImpl.commandsOf(group).length : reached.size + group.live.filter((p) => !reached.has(p.pid)).length,
    signalled: new Set(gotIt.map(keyOf)),
    killed: 0,
    emptiedAt: live === 0 ? began : undefined,
    lastLive: live,
    changedAt: 0
  }
}

/**
 * Kill rounds, each waiting for what it struck to go, until all are gone or
 * `until`: the second `killInterval` after the first, and each later one
 * twice as long after its predecessor. A member a SIGKILL has struck is
 * already dying, and striking it again costs the kernel a pass over every
 * member: a thousand take it most of a second to end, and a round every
 * 10 ms meanwhile took a quarter of a core from them. The checks slow
 * down as the kill goes on too, not as each round does.
 */
const killUntilEmpty = (run: Run, until: number, limits: LimitsShape) =>
  Effect.gen(function*() {
    const killStarted = yield* Monotonic.millis
    for (let interval = Duration.toMillis(limits.killInterval); isAnyAlive(run) && (yield* Monotonic.millis) < until; interval *= 2) {
      yield* run.membership.kill
      for (const p of run.progress) p.killed = Math.max(p.killed, p.group.struck)
      const nextRound = (yield* Monotonic.millis) + interval
      yield* pollUntilEmpty(run, Math.min(nextRound, until), undefined, killStarted)
    }
  })

/** A member first seen after the first signal was sent (born since, or not yet in its cgroup) gets it then, within the grace. */
const signalNewcomers = (run: Run) =>
  Effect.forEach(run.progress, ({ group, signalled }) => {
    const fresh = group.live.filter((p) => !signalled.has(keyOf(p)) && !group.assumed.has(p.pid))
    fresh.forEach((p) => signalled.add(keyOf(p)))
    return fresh.length === 0 ? Effect.void : Effect.zipRight(
      run.membership.signalEach(group, fresh, run.first),
      run.membership.signalEach(group, fresh, "SIGCONT")
    )
  }, { discard: true })

/**
 * When assumed members are read, at the latest, even though their group
 * lives on and keeps changing: a quarter into the grace, and at least
 * 20 ms, which leaves one that missed the first signal three quarters of
 * the grace to end. At 20 ms, a group still dying of the signal (50
 * members take 30 ms) was read member by member, three syscalls each,
 * while it died; a grace under 20 ms reads them at its end.
 */
const resolveAfter = (grace: number) => Math.min(grace, Math.max(MIN_RESOLVE_AFTER_MS, grace / 4))

/** How long a group's live members must hold steady before its assumed ones are read: no one is dying of the signal then. */
const STEADY_MS = 5

/**
 * Assumed members (see `Group.assumed`) are read once they outlive their
 * group, once its members have held steady for `STEADY_MS` (whoever is
 * left is not dying of the first signal: reading them takes CPU from no
 * one), or `run.resolveAfter` into the grace. One that is not in the group
 * missed the first signal, and is then a newcomer. A group signal 0 alone
 * cannot say the group is gone where a zombie of it is never reaped. True
 * if any was read.
 */
const resolveSurvivors = (run: Run, age: number) =>
  Effect.map(
    Effect.forEach(run.progress, (p) =>
      p.group.assumed.size === 0 ? Effect.succeed(false) : Effect.map(
        run.membership.resolve(p.group, age >= run.resolveAfter || steadyFor(p, age) >= STEADY_MS),
        (resolved) => {
          for (const q of resolved) if (q.pgid === p.group.target.pgid) p.signalled.add(keyOf(q))
          return resolved.length > 0
        }
      )),
    (read) => read.includes(true)
  )

/** For how long (ms) `p`'s live members have been as many as now; a change is noted as it is seen. */
const steadyFor = (p: Progress, age: number) => {
  if (p.group.live.length !== p.lastLive) {
    p.lastLive = p.group.live.length
    p.changedAt = age
  }
  return age - p.changedAt
}

/** Each group's own end: a group found with members again (a newcomer) has not ended yet. */
const observe = (run: Run) =>
  Effect.map(Monotonic.millis, (now) => {
    for (const p of run.progress) p.emptiedAt = p.group.live.length > 0 ? undefined : p.emptiedAt ?? now
  })

const isAnyAlive = (run: Run) => run.membership.groups.some((g) => g.live.length > 0)

/**
 * Whether every group is gone, or is down to procScan's init: the init
 * outlives what it adopted, so its group is never seen empty while an
 * orphan born since the last scan lives on (a TERM trap that starts a job
 * and exits), and members born since are looked for then, as they are
 * once a group is empty (ADR 58).
 */
const onlyInitsLeft = (run: Run) =>
  run.membership.groups.every((g) => g.live.length === 0 || (g.target.reaper === true && MembershipImpl.commandsOf(g).length === 0))

const keyOf = (p: ProcessInfo) => `${p.pid}:${p.startTime}`

/**
 * The pause before the next check, `age` ms into a phase (see
 * `pollUntilEmpty`): a quarter of it, within bounds that are wider while a
 * wake event is still to come. Once the last has come, a quarter of the
 * time since then where that is shorter: the pipes close as their last
 * holder exits, a moment before the kernel takes it out of its cgroup, so
 * the check they wake can find it still there, and the next comes 1 ms
 * later, not a quarter of the phase's age (7 ms, 30 ms into a stop of 50
 * processes). An earlier event does not shorten them: the leader's exit
 * comes first of a thousand members SIGKILLed, which take 0.6 s to end.
 */
const pauseAt = (wake: Wake, age: number) =>
  wake.expecting()
    ? Math.min(MAX_PAUSE_AWAITING_EVENT_MS, Math.max(MIN_PAUSE_AWAITING_EVENT_MS, Math.floor(age / 4)))
    : Math.min(MAX_PAUSE_MS, Math.max(1, Math.floor(Math.min(age, wake.sinceEvent()) / 4)))

/** Pauses of a stop, each ended early by the next of its wake events; `close` stops listening for them. */
interface Wake {
  readonly pause: (ms: number) => Effect.Effect<void>
  /** Whether an event is still to come, to end a pause early. */
  readonly expecting: () => boolean
  /** ms since the last event came, infinite before the first. */
  readonly sinceEvent: () => number
  readonly close: Effect.Effect<void>
}

/**
 * Sleeps for `ms`, or less if one of the events (or hints) not yet seen
 * happens first; one that happened between pauses ends the next at once.
 * A hint only ends a pause: it is not counted as an event to come. A pause costs one
 * timer fiber: each event has one listener for the whole stop, started at
 * the first pause (a stop that ends at its first check starts none). Racing
 * the timer and every event anew at each pause forked a fiber per racer and
 * cost three to five times the CPU, which a stop of many dying processes
 * takes from them.
 */
const makeWake = (events: ReadonlyArray<Effect.Effect<void>>, now: () => number, hints: ReadonlyArray<Effect.Effect<void>> = []): Wake => {
  let missed = false
  let unfired = events.length
  let firedAt = -Infinity
  let endPause: (() => void) | undefined
  const wakeUp = () => {
    if (endPause === undefined) missed = true
    else endPause()
  }
  const fire = () => {
    unfired -= 1
    firedAt = now()
    wakeUp()
  }
  const listened = [...events.map((event) => Effect.zipRight(event, Effect.sync(fire))), ...hints.map((hint) => Effect.zipRight(hint, Effect.sync(wakeUp)))]
  let listeners: ReadonlyArray<Fiber.RuntimeFiber<void>> | undefined
  const listen = Effect.suspend(() =>
    listeners !== undefined || listened.length === 0 ? Effect.void : Effect.map(
      // a stop usually runs in a finalizer: what it forks must stay interruptible
      Effect.forEach(listened, (listener) => Effect.forkDaemon(Effect.interruptible(listener))),
      (fibers) => void (listeners = fibers)
    ))
  const pause = (ms: number) =>
    Effect.zipRight(
      listen,
      Effect.flatMap(Effect.forkDaemon(Effect.interruptible(Effect.sleep(ms))), (timer) =>
        Effect.async<void>((resume) => {
          const end = () => {
            endPause = undefined
            timer.removeObserver(end)
            timer.unsafeInterruptAsFork(FiberId.none)
            resume(Effect.void)
          }
          if (missed) {
            missed = false
            return end()
          }
          endPause = end
          timer.addObserver(end)
        }))
    )
  return {
    pause,
    expecting: () => unfired > 0,
    sinceEvent: () => now() - firedAt,
    // the listeners are told to end, not awaited: awaiting their interruption took a stop 0.05-0.6 ms after its last check
    close: Effect.sync(() => listeners?.forEach((listener) => listener.unsafeInterruptAsFork(FiberId.none)))
  }
}

/**
 * Re-reads the known members after pauses that grow with the phase (begun
 * at `since`, by default now): a quarter of its age, or of the time since
 * the last wake event came where that is shorter, at least 1 ms and at
 * most 10 ms (and never shorter than a check took). A fast exit is seen
 * fast, a slow one within a quarter of its own time, and a stubborn group
 * is not spun on. While a wake event is still to come (the leader's exit,
 * its pipes closing), the polls only catch what the events miss, and
 * pause at least 5 ms and up to 50: on the 2-core VMs measured, a check
 * and its wake cost 0.1-1 ms of CPU, taken from the processes that are
 * ending, and a group cannot be empty while its pipes are open (a
 * thousand members SIGKILLed took 0.6 s to end, checked every 10 ms: 70 ms
 * of CPU more than at up to 50). Only
 * when they are all gone (or only procScan's init is left, see
 * `onlyInitsLeft`) is membership enumerated again, for members born
 * since; `onScan` sees what that finds, or what `onCheck` found (true).
 */
const pollUntilEmpty = (
  run: Run,
  deadline: number,
  onScan: (run: Run) => Effect.Effect<void> = () => Effect.void,
  since?: number,
  onCheck: (run: Run, age: number) => Effect.Effect<boolean> = () => Effect.succeed(false)
) =>
  Effect.gen(function*() {
    const from = since ?? (yield* Monotonic.millis)
    while (true) {
      const checkStarted = yield* Monotonic.millis
      yield* run.membership.recheck
      const resolved = yield* onCheck(run, checkStarted - from)
      const emptied = !isAnyAlive(run)
      const newbornsDue = emptied || onlyInitsLeft(run)
      if (newbornsDue) yield* run.membership.scanNewborn
      if (resolved || newbornsDue) yield* onScan(run)
      yield* observe(run)
      const now = yield* Monotonic.millis
      if (!isAnyAlive(run) || now >= deadline) return
      const pause = Math.max(pauseAt(run.wake, now - from), now - checkStarted)
      yield* run.wake.pause(Math.min(pause, deadline - now))
    }
  })
