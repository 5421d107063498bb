/**
 * The stop: SIGTERM and SIGCONT to every group of a shell's session, a
 * zombie-aware wait for it to empty, then a bounded SIGKILL loop. Many
 * shells stop together with one process-table scan per tick.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Limits } from "./Limits.js"
import type { ProcessInfo, Signal } from "./ProcessTable.js"
import { isGone, ProcessTable } from "./ProcessTable.js"

/** What identifies a group corral started, and guards against PID reuse. */
export interface StopTarget {
  readonly pgid: number
  readonly sid: number
  /** Process-table time at or before the group's birth; older processes are never members. */
  readonly startTime: number
  /** `CORRAL_SHELL_ID` of the group, used to find processes that left the session. */
  readonly shellId?: string | undefined
}

export interface StopReport {
  readonly pgid: number
  readonly signals: Readonly<Record<"SIGTERM" | "SIGCONT" | "SIGKILL", number>>
  readonly escalated: boolean
  readonly durationMs: number
  /** Live processes when the stop began. */
  readonly members: number
  /** Pids still alive when the SIGKILL loop gave up (uninterruptible sleep, or no permission). */
  readonly survivors: ReadonlyArray<number>
  /** Pids that had left the session (`setsid`), found by their `CORRAL_SHELL_ID`. */
  readonly escaped: ReadonlyArray<number>
}

export interface StopOptions {
  readonly grace?: Duration.DurationInput | undefined
  /**
   * Events after which the group may have emptied (the leader's exit, its
   * pipes closing). Each one ends the current pause early, once.
   */
  readonly wakeOn?: ReadonlyArray<Effect.Effect<void>> | undefined
}

export const stopGroup = (target: StopTarget, options?: StopOptions) =>
  Effect.map(stopGroups([target], options), (reports) => reports[0]!)

export const stopGroups = Effect.fn("GroupStop.stopGroups")(function*(
  targets: ReadonlyArray<StopTarget>,
  options?: StopOptions
) {
  const limits = yield* Limits
  const grace = Duration.toMillis(options?.grace ?? limits.grace)
  const members = yield* makeMembership(targets)
  const began = yield* Clock.currentTimeMillis
  const tally = targets.map(() => ({ SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 }))
  const escaped = targets.map(() => new Set<number>())
  const signalAll = (live: Live, signal: Signal) =>
    Effect.forEach(targets, (target, i) => signalTarget(target, live[i]!, signal, tally[i]!, escaped[i]!), { discard: true })

  const wake = makeWake(options?.wakeOn ?? [])
  let live = yield* members.scan
  const initial = live.map((l) => l.length)
  yield* signalAll(live, "SIGTERM")
  yield* signalAll(live, "SIGCONT")
  live = yield* pollUntilEmpty(members, wake, live, began + grace)
  const escalated = live.map((l) => l.length > 0)
  const killUntil = (yield* Clock.currentTimeMillis) + Duration.toMillis(limits.killTimeout)
  while (isAnyAlive(live) && (yield* Clock.currentTimeMillis) < killUntil) {
    yield* signalAll(live, "SIGKILL")
    const nextRound = (yield* Clock.currentTimeMillis) + Duration.toMillis(limits.killInterval)
    live = yield* pollUntilEmpty(members, wake, live, Math.min(nextRound, killUntil))
  }
  if (isAnyAlive(live)) live = yield* members.scan
  const durationMs = (yield* Clock.currentTimeMillis) - began
  return targets.map((target, i): StopReport => ({
    pgid: target.pgid,
    signals: tally[i]!,
    escalated: escalated[i]!,
    durationMs,
    members: initial[i]!,
    survivors: live[i]!.map((p) => p.pid),
    escaped: [...escaped[i]!]
  }))
})

type Live = ReadonlyArray<ReadonlyArray<ProcessInfo>>

const isAnyAlive = (live: Live) => live.some((l) => l.length > 0)

/** Sleeps for `ms`, or less if one of the events not yet seen happens first. */
const makeWake = (events: ReadonlyArray<Effect.Effect<void>>) => {
  let pending = events.map((event, i) => ({ i, fired: Effect.as(event, i) }))
  return (ms: number) =>
    // a stop usually runs in a finalizer: the losing waits must stay interruptible, or the race waits for them
    Effect.map(Effect.raceAll([Effect.as(Effect.sleep(ms), -1), ...pending.map((p) => p.fired)].map(Effect.interruptible)), (fired) => {
      pending = pending.filter((p) => p.i !== fired)
    })
}

/**
 * Re-reads the known members every millisecond for the first 20 ms, then
 * every 10 ms (never more often than a check costs), so a fast exit is seen
 * fast without spinning on a stubborn group. Only when they are all gone is
 * the whole table scanned, to catch members forked since the last scan.
 */
const pollUntilEmpty = (members: Membership, wake: (ms: number) => Effect.Effect<void>, known: Live, deadline: number) =>
  Effect.gen(function*() {
    const from = yield* Clock.currentTimeMillis
    let live = known
    while (true) {
      const checkStarted = yield* Clock.currentTimeMillis
      live = yield* members.recheck(live)
      if (!isAnyAlive(live)) live = yield* members.scan
      const now = yield* Clock.currentTimeMillis
      if (!isAnyAlive(live) || now >= deadline) return live
      const pause = Math.max(now - from < 20 ? 1 : 10, now - checkStarted)
      yield* wake(Math.min(pause, deadline - now))
    }
  })

/** Signals every group of the target's session, and each escaped process by pid. */
const signalTarget = (
  target: StopTarget,
  live: ReadonlyArray<ProcessInfo>,
  signal: Signal,
  tally: Record<string, number>,
  escaped: Set<number>
) =>
  Effect.gen(function*() {
    const table = yield* ProcessTable
    const groups = new Set<number>()
    for (const p of live) {
      if (p.sid === target.sid || p.pgid === target.pgid) {
        groups.add(p.pgid)
      } else {
        escaped.add(p.pid)
        tally[signal]! += (yield* table.signal(p.pid, signal)) ? 1 : 0
      }
    }
    for (const pgid of groups) tally[signal]! += (yield* table.signal(-pgid, signal)) ? 1 : 0
  })

interface Membership {
  /** One scan of the whole table: every member, new ones included. */
  readonly scan: Effect.Effect<Live>
  /** Re-reads only the given members; one that died, or whose pid was reused, is dropped. */
  readonly recheck: (live: Live) => Effect.Effect<Live>
}

/**
 * Splits the table into each target's live members: its group, its session,
 * and processes elsewhere that carry its `CORRAL_SHELL_ID`. A process born
 * before the target is never a member: its group or session id is a recycled
 * number, and signalling it would hit a stranger.
 */
const makeMembership = (targets: ReadonlyArray<StopTarget>) =>
  Effect.map(ProcessTable, (table): Membership => {
    const byShellId = new Map(targets.flatMap((t, i) => (t.shellId ? [[t.shellId, i] as const] : [])))
    const bySession = new Map(targets.map((t, i) => [t.sid, i]))
    const byGroup = new Map(targets.map((t, i) => [t.pgid, i]))
    const oldest = Math.min(...targets.map((t) => t.startTime))
    const tags = new Map<string, Option.Option<string>>()
    const tagOf = (p: ProcessInfo) => {
      const key = `${p.pid}:${p.startTime}`
      const known = tags.get(key)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.tap(table.shellIdOf(p.pid), (tag) => tags.set(key, tag))
    }
    const scan = Effect.gen(function*() {
      const live: Array<Array<ProcessInfo>> = targets.map(() => [])
      for (const p of yield* table.scan) {
        if (isGone(p) || p.pid === process.pid) continue
        const i = bySession.get(p.sid) ?? byGroup.get(p.pgid)
        if (i !== undefined) {
          if (p.startTime >= targets[i]!.startTime) live[i]!.push(p)
        } else if (byShellId.size > 0 && p.startTime >= oldest) {
          const j = Option.flatMap(yield* tagOf(p), (tag) => Option.fromNullable(byShellId.get(tag)))
          if (Option.isSome(j) && p.startTime >= targets[j.value]!.startTime) live[j.value]!.push(p)
        }
      }
      return live as Live
    })
    const stillAlive = (p: ProcessInfo) =>
      Effect.map(table.lookup(p.pid), Option.exists((now) => now.startTime === p.startTime && !isGone(now)))
    const recheck = (live: Live) => Effect.forEach(live, (ps) => Effect.filter(ps, stillAlive))
    return { scan, recheck }
  })
