/**
 * The stop: the stop signal (SIGTERM unless told) and SIGCONT to every
 * member, a zombie-aware wait for the shell to empty, then a bounded kill loop. Who the members are, and how a
 * kill reaches all of them, is the membership's business (a cgroup, or a
 * process-table scan); the sequence is the same for both. Many shells stop
 * together with one process-table scan per tick.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { Limits } from "./Limits.js"
import type { ContainmentBackend } from "./Shell.js"
import type { StopTarget as StopTargetSchema } from "./internal/watcherMessage.js"
import type { Live, Membership } from "./internal/membership.js"
import type { ProcessInfo, Signal } from "./ProcessTable.js"
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
}

export const stopGroup = (target: StopTarget, options?: StopOptions) =>
  Effect.map(stopGroups([target], options), (reports) => reports[0]!)

/** One group's stop as it goes: what its report is made of. */
interface Progress {
  readonly target: StopTarget
  /** Live members when the stop began. */
  readonly members: number
  /** The most members the kill loop struck at once. */
  killed: number
  /** When the group was last seen empty, after being seen with members; undefined while it has some. */
  emptiedAt: number | undefined
}

export const stopGroups = Effect.fn("GroupStop.stopGroups")(function*(
  targets: ReadonlyArray<StopTarget>,
  options?: StopOptions
) {
  const limits = yield* Limits
  const members = MembershipImpl.make(yield* ProcessTable, targets)
  const grace = Duration.toMillis(options?.grace ?? limits.grace)
  const began = yield* Clock.currentTimeMillis
  const wake = makeWake(options?.wakeOn ?? [])
  const first = options?.signal ?? "SIGTERM"

  let live = yield* members.scan
  const progress = targets.map((target, i): Progress => ({
    target,
    members: live[i]!.length,
    killed: 0,
    emptiedAt: live[i]!.length === 0 ? began : undefined
  }))
  // each group's own end: a group found with members again (a newcomer) has not ended yet
  const observe = (found: Live) =>
    Effect.map(Clock.currentTimeMillis, (now) =>
      found.forEach((ps, i) => {
        const p = progress[i]!
        p.emptiedAt = ps.length > 0 ? undefined : p.emptiedAt ?? now
      }))
  yield* members.signal(live, first)
  yield* members.signal(live, "SIGCONT")
  // a member first seen later (born since, or not yet in its cgroup) gets the first signal then, within the grace
  const termed = new Set(live.flatMap((ps) => ps.map(keyOf)))
  const termNewcomers = (found: Live) => {
    const fresh = found.map((ps) => ps.filter((p) => !termed.has(keyOf(p))))
    fresh.forEach((ps) => ps.forEach((p) => termed.add(keyOf(p))))
    return Effect.zipRight(members.signalEach(fresh, first), members.signalEach(fresh, "SIGCONT"))
  }
  live = yield* pollUntilEmpty(members, wake, live, began + grace, observe, termNewcomers)
  live.forEach((ps, i) => (progress[i]!.killed = ps.length))
  const killUntil = (yield* Clock.currentTimeMillis) + Duration.toMillis(limits.killTimeout)
  while (isAnyAlive(live) && (yield* Clock.currentTimeMillis) < killUntil) {
    const struck = yield* members.kill(live)
    struck.forEach((ps, i) => (progress[i]!.killed = Math.max(progress[i]!.killed, ps.length)))
    const nextRound = (yield* Clock.currentTimeMillis) + Duration.toMillis(limits.killInterval)
    live = yield* pollUntilEmpty(members, wake, struck, Math.min(nextRound, killUntil), observe)
  }
  if (isAnyAlive(live)) live = yield* members.scan
  const finished = yield* Clock.currentTimeMillis
  return progress.map((p, i): StopReport => ({
    pgid: p.target.pgid,
    containment: backendOf(p.target),
    signals: members.tally[i]!,
    escalated: p.killed > 0,
    killed: p.killed,
    durationMs: (live[i]!.length > 0 ? finished : p.emptiedAt ?? finished) - began,
    members: p.members,
    survivors: live[i]!.map((p) => p.pid),
    escaped: [...members.escaped[i]!]
  }))
})

const isAnyAlive = (live: Live) => live.some((l) => l.length > 0)

const keyOf = (p: ProcessInfo) => `${p.pid}:${p.startTime}`

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
 * membership enumerated again, to catch members forked since.
 */
const pollUntilEmpty = (
  members: Membership,
  wake: (ms: number) => Effect.Effect<void>,
  known: Live,
  deadline: number,
  observe: (live: Live) => Effect.Effect<void>,
  onScan: (live: Live) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const from = yield* Clock.currentTimeMillis
    let live = known
    while (true) {
      const checkStarted = yield* Clock.currentTimeMillis
      live = yield* members.recheck(live)
      if (!isAnyAlive(live)) {
        live = yield* members.scan
        yield* onScan(live)
      }
      yield* observe(live)
      const now = yield* Clock.currentTimeMillis
      if (!isAnyAlive(live) || now >= deadline) return live
      const pause = Math.max(now - from < 20 ? 1 : 10, now - checkStarted)
      yield* wake(Math.min(pause, deadline - now))
    }
  })
