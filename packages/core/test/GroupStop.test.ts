/**
 * The stop algorithm against a scripted process table and the TestClock:
 * deterministic, no real process involved. What the kernel does is covered
 * by ProcessGroup.stop.test.ts.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { LimitsShape, ProcessInfo, Signal, TestScript } from "@corral/core"
import { GroupStop, Limits, makeTestScript, ProcessTable } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import type { SignalRequest } from "./helpers.js"
import { fakeProcess, instrumentedTable, vanish } from "./helpers.js"

// Shorter than the defaults (3 s, 1 s) only to keep the TestClock's stepping
// cheap: every poll is a step. The kill rounds' first pause is 10 ms, as by default.
const GRACE = 300
const KILL_TIMEOUT = 200
/** Kill rounds within the kill timeout: at 0, 10, 30, 70 and 150 ms, each pause twice the one before. */
const ROUNDS = 5

/** Session 5000: the leader and a worker in its group. */
const leader = fakeProcess(5000)
const worker = fakeProcess(5001, { pgid: 5000, sid: 5000, ppid: 5000 })
const target: GroupStop.StopTarget = { pgid: 5000, sid: 5000, startTime: 10, shellId: "corral-a" }

interface Setup {
  readonly table: ReadonlyArray<ProcessInfo>
  readonly shellIds?: Map<number, string>
  /** What the scripted processes do when signalled. */
  readonly onSignal?: (script: TestScript, target: number, signal: Signal) => Effect.Effect<void>
  readonly limits?: Partial<LimitsShape>
}

const setup = (options: Setup) =>
  Effect.gen(function*() {
    const base = yield* makeTestScript(options.table, options.shellIds ? { shellIds: options.shellIds } : {})
    const onSignal = options.onSignal
    const script: TestScript = onSignal ? { ...base, onSignal: (t, s) => onSignal(base, t, s) } : base
    const table = yield* instrumentedTable(script)
    const limits = { grace: Duration.millis(GRACE), killTimeout: Duration.millis(KILL_TIMEOUT), ...options.limits }
    const provide = Effect.provide(Layer.merge(table.layer, Limits.layerWith(limits)))
    return {
      script,
      scans: Ref.get(table.scans),
      rechecks: Ref.get(table.rechecks),
      requested: Ref.get(table.requested),
      /** Signals the table accepted, as `SIGTERM -5000`. */
      delivered: Effect.map(Ref.get(script.signals), (all) => all.map((s) => `${s.signal} ${s.target}`)),
      stop: (targets: ReadonlyArray<GroupStop.StopTarget>, stopOptions?: GroupStop.StopOptions) =>
        provide(GroupStop.stopGroups(targets, stopOptions)),
      stopOne: (stopOptions?: GroupStop.StopOptions) => provide(GroupStop.stopGroup(target, stopOptions))
    }
  })

/** Members exit on SIGTERM. */
const obedient = (script: TestScript, target: number, signal: Signal) =>
  signal === "SIGTERM" ? vanish(script, target) : Effect.void

/** Runs `effect`, which must finish without the clock moving at all. */
const finishesAtOnce = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    yield* TestClock.adjust(0)
    expect(Option.isSome(yield* Fiber.poll(fiber)), "the stop waited for the clock").toBe(true)
    return yield* Fiber.join(fiber)
  })

const isDone = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(Fiber.poll(fiber), Option.isSome)
const kills = (requests: ReadonlyArray<SignalRequest>) => requests.filter((r) => r.signal === "SIGKILL")

describe("GroupStop: a group that obeys SIGTERM", () => {
  it.effect("is stopped with SIGTERM and SIGCONT, never SIGKILL", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], onSignal: obedient })
      const report = yield* finishesAtOnce(t.stopOne())
      expect(report).toEqual({
        pgid: 5000,
        containment: "procScan",
        // SIGCONT found the group already gone
        signals: { SIGTERM: 1, SIGCONT: 0, SIGKILL: 0 },
        escalated: false,
        killed: 0,
        durationMs: 0,
        members: 2,
        survivors: [],
        escaped: []
      })
      expect((yield* t.requested).map((r) => `${r.signal} ${r.target}`)).toEqual(["SIGTERM -5000", "SIGCONT -5000"])
    }))

  it.effect("after signalAtOnce reached the group, signals only the members it did not reach, by pid, and counts them all", () =>
    Effect.gen(function*() {
      // the leader and the worker got the early SIGTERM and are gone; 5002 was not in the cgroup's listing
      // (born since); 5003 is listed but leads a session of its own, out of the group's reach
      const newcomer = fakeProcess(5002, { pgid: 5000, sid: 5000, ppid: 5000 })
      const elsewhere = fakeProcess(5003, { ppid: 5000 })
      const t = yield* setup({ table: [newcomer, elsewhere], shellIds: new Map([[5003, "corral-a"]]), onSignal: obedient })
      const report = yield* finishesAtOnce(t.stopOne({ sentAtOnce: new Map([[5000, new Set([5000, 5001, 5003])]]) }))
      expect((yield* t.requested).map((r) => `${r.signal} ${r.target}`)).toEqual([
        "SIGTERM 5002",
        "SIGTERM 5003",
        "SIGCONT 5002",
        "SIGCONT 5003"
      ])
      expect(report).toMatchObject({ members: 4, escaped: [5003], signals: { SIGTERM: 3, SIGCONT: 1 }, escalated: false })
    }))

  it.effect("sends SIGCONT right after SIGTERM, so stopped members act on it", () =>
    Effect.gen(function*() {
      const stopped = { ...worker, state: "T" }
      // a stopped member ignores SIGTERM until continued; then it exits
      const onSignal = (script: TestScript, _: number, signal: Signal) =>
        signal === "SIGCONT" ? vanish(script, -5000) : Effect.void
      const t = yield* setup({ table: [leader, stopped], onSignal })
      const report = yield* finishesAtOnce(t.stopOne())
      expect(yield* t.requested).toEqual([
        { target: -5000, signal: "SIGTERM", at: 0 },
        { target: -5000, signal: "SIGCONT", at: 0 }
      ])
      expect(report.escalated).toBe(false)
    }))

  it.effect("returns as soon as slow members are gone, well before the grace ends", () =>
    Effect.gen(function*() {
      // members take 50 ms to exit after SIGTERM
      const onSignal = (script: TestScript, target: number, signal: Signal) =>
        signal === "SIGTERM" ? Effect.asVoid(Effect.fork(Effect.delay(vanish(script, target), 50))) : Effect.void
      const t = yield* setup({ table: [leader, worker], onSignal })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(49)
      expect(yield* isDone(fiber)).toBe(false)
      yield* TestClock.adjust(20)
      expect(yield* isDone(fiber)).toBe(true)
      const report = yield* Fiber.join(fiber)
      expect(report.escalated).toBe(false)
      expect(report.signals.SIGKILL).toBe(0)
      expect(report.durationMs).toBeGreaterThanOrEqual(50)
      expect(report.durationMs).toBeLessThanOrEqual(69)
    }))
})

describe("GroupStop: wake events", () => {
  it.effect("an event ends the pause under way: the group is seen gone at once, not at the next poll", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker] })
      const event = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [Deferred.await(event)] }))
      // past the first 20 ms: the polls are 10 ms apart by now, and one is under way
      yield* TestClock.adjust(35)
      expect(yield* isDone(fiber)).toBe(false)
      yield* vanish(t.script, -5000)
      yield* Deferred.succeed(event, undefined)
      yield* TestClock.adjust(0)
      expect(yield* isDone(fiber), "the stop waited for its next poll").toBe(true)
      expect((yield* Fiber.join(fiber)).durationMs).toBe(35)
    }))

  it.effect("an event that came before a pause ends that pause at once", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker] })
      const event = yield* Deferred.make<void>()
      yield* Deferred.succeed(event, undefined)
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [Deferred.await(event)] }))
      yield* TestClock.adjust(0)
      // each check looks up both members: a second check came without the clock moving, and no third
      expect(yield* t.rechecks).toBe(4)
      yield* vanish(t.script, -5000)
      yield* TestClock.adjust(1)
      expect((yield* Fiber.join(fiber)).durationMs).toBe(1)
    }))

  it.effect("while an event is still to come, pauses grow past 10 ms up to 50 ms; once every event came, at most 10 ms again", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], limits: { grace: Duration.seconds(3) } })
      const event = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [Deferred.await(event)] }))
      yield* TestClock.adjust(1000)
      // each check looks up both members
      const before = yield* t.rechecks
      yield* TestClock.adjust(500)
      expect((yield* t.rechecks) - before, "a check every 50 ms").toBeLessThanOrEqual(2 * 11)
      yield* Deferred.succeed(event, undefined)
      yield* TestClock.adjust(0)
      const after = yield* t.rechecks
      yield* TestClock.adjust(500)
      expect((yield* t.rechecks) - after, "a check every 10 ms").toBeGreaterThanOrEqual(2 * 49)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("after the last event, a check that still finds members is followed 1 ms later, not a quarter of the stop's age later", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], limits: { grace: Duration.seconds(3) } })
      const event = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [Deferred.await(event)] }))
      yield* TestClock.adjust(1000)
      // the pipes close as their last holder exits, a moment before the kernel has it gone
      yield* Deferred.succeed(event, undefined)
      yield* TestClock.adjust(0)
      expect(yield* isDone(fiber)).toBe(false)
      yield* vanish(t.script, -5000)
      yield* TestClock.adjust(1)
      expect(yield* isDone(fiber), "the stop waited a quarter of its age past the event").toBe(true)
      expect((yield* Fiber.join(fiber)).durationMs).toBe(1001)
    }))

  it.effect("an event while another is still to come leaves the pauses as long: the leader's exit comes first of a thousand members dying", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], limits: { grace: Duration.seconds(3) } })
      const [exit, closed] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [Deferred.await(exit), Deferred.await(closed)] }))
      yield* TestClock.adjust(1000)
      yield* Deferred.succeed(exit, undefined)
      yield* TestClock.adjust(0)
      const before = yield* t.rechecks
      yield* TestClock.adjust(500)
      // each check looks up both members; 5 ms pauses would make 100 checks
      expect((yield* t.rechecks) - before, "a check every 50 ms").toBeLessThanOrEqual(2 * 11)
      yield* Deferred.succeed(closed, undefined)
      yield* TestClock.adjust(0)
      yield* vanish(t.script, -5000)
      yield* TestClock.adjust(1)
      expect((yield* Fiber.join(fiber)).durationMs).toBe(1501)
    }))

  it.effect("stops listening for its events when it ends", () =>
    Effect.gen(function*() {
      const listening = yield* Ref.make(false)
      const event = Effect.never.pipe(
        Effect.onInterrupt(() => Ref.set(listening, false)),
        Effect.zipLeft(Effect.void),
        (never) => Effect.zipRight(Ref.set(listening, true), never)
      )
      // members take 50 ms to exit after SIGTERM: the stop pauses, so it listens
      const onSignal = (script: TestScript, target: number, signal: Signal) =>
        signal === "SIGTERM" ? Effect.asVoid(Effect.fork(Effect.delay(vanish(script, target), 50))) : Effect.void
      const t = yield* setup({ table: [leader, worker], onSignal })
      const fiber = yield* Effect.fork(t.stopOne({ wakeOn: [event] }))
      yield* TestClock.adjust(10)
      expect(yield* Ref.get(listening)).toBe(true)
      yield* TestClock.adjust(60)
      yield* Fiber.join(fiber)
      expect(yield* Ref.get(listening), "a listener outlived its stop").toBe(false)
    }))
})

describe("GroupStop: a group that ignores SIGTERM", () => {
  it.effect("escalates to SIGKILL exactly when the grace ends", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker] })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE - 1)
      expect(kills(yield* t.requested)).toEqual([])
      yield* TestClock.adjust(1)
      expect(kills(yield* t.requested)).toEqual([{ target: -5000, signal: "SIGKILL", at: GRACE }])
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("repeats SIGKILL after killInterval, then after pauses that double, until the members vanish", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], limits: { killInterval: Duration.millis(100), killTimeout: Duration.seconds(1) } })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE + 350)
      expect(kills(yield* t.requested).map((r) => r.at)).toEqual([GRACE, GRACE + 100, GRACE + 300])
      // the members die of the third SIGKILL
      yield* Ref.set(t.script.processes, [])
      yield* TestClock.adjust(100)
      const report = yield* Fiber.join(fiber)
      expect(kills(yield* t.requested)).toHaveLength(3)
      expect(report).toMatchObject({
        // the second SIGCONT follows the first SIGKILL: nothing is left frozen
        signals: { SIGTERM: 1, SIGCONT: 2, SIGKILL: 3 },
        escalated: true,
        killed: 2,
        members: 2,
        survivors: []
      })
      expect(report.durationMs).toBeGreaterThan(GRACE + 350)
      expect(report.durationMs).toBeLessThan(GRACE + 450)
    }))

  it.effect("gives up after killTimeout and reports the survivors", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker] })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT - 1)
      expect(yield* isDone(fiber)).toBe(false)
      yield* TestClock.adjust(1)
      const report = yield* Fiber.join(fiber)
      expect(report).toEqual({
        pgid: 5000,
        containment: "procScan",
        // rounds from the end of the grace to the end of the kill timeout, each pause twice the one before
        signals: { SIGTERM: 1, SIGCONT: 2, SIGKILL: ROUNDS },
        escalated: true,
        killed: 2,
        durationMs: GRACE + KILL_TIMEOUT,
        members: 2,
        survivors: [5000, 5001],
        escaped: []
      })
    }))

  it.effect("takes the grace from the stop's options over Limits", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], limits: { killTimeout: Duration.millis(0) } })
      const fiber = yield* Effect.fork(t.stopOne({ grace: "50 millis" }))
      yield* TestClock.adjust(50)
      const report = yield* Fiber.join(fiber)
      expect(report).toMatchObject({ escalated: true, durationMs: 50, survivors: [5000, 5001] })
    }))
})

describe("GroupStop: zombies", () => {
  it.effect("counts a single-threaded zombie gone: nothing to signal, nothing to wait for", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [{ ...leader, state: "Z" }, { ...worker, state: "Z" }] })
      const report = yield* finishesAtOnce(t.stopOne())
      expect(report).toMatchObject({ members: 0, escalated: false, durationMs: 0, survivors: [] })
      expect(yield* t.requested).toEqual([])
    }))

  it.effect("counts a zombie whose other threads run alive, until those threads die", () =>
    Effect.gen(function*() {
      const busy = { ...worker, state: "Z", threads: 2 }
      // the live thread ignores SIGTERM and dies of SIGKILL
      const onSignal = (script: TestScript, _: number, signal: Signal) =>
        signal === "SIGKILL" ? Ref.set(script.processes, [{ ...busy, threads: 1 }]) : Effect.void
      const t = yield* setup({ table: [busy], onSignal })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE)
      const report = yield* Fiber.join(fiber)
      expect(report).toMatchObject({ members: 1, escalated: true, survivors: [], signals: { SIGKILL: 1 } })
    }))
})

describe("GroupStop: whom it signals", () => {
  it.effect("never signals a group or session whose id was reused by older processes", () =>
    Effect.gen(function*() {
      // 5000 and 5001 were born before the target: the numbers are recycled
      const reused = { ...target, startTime: 1_000 }
      const t = yield* setup({
        table: [{ ...leader, startTime: 900 }, { ...worker, startTime: 999 }],
        shellIds: new Map([[5001, "corral-a"]])
      })
      const [report] = yield* finishesAtOnce(t.stop([reused]))
      expect(yield* t.requested).toEqual([])
      expect(report).toMatchObject({ members: 0, durationMs: 0, escalated: false, survivors: [], escaped: [] })
    }))

  it.effect("never signals pid 1 or group 1, even when told to stop it", () =>
    Effect.gen(function*() {
      const init = fakeProcess(1, { ppid: 0, comm: "init" })
      const t = yield* setup({ table: [init] })
      const fiber = yield* Effect.fork(t.stop([{ pgid: 1, sid: 1, startTime: 0 }]))
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      const [report] = yield* Fiber.join(fiber)
      // the refusal is the table's: ProcessTable.test.ts checks the real tables refuse too
      expect(yield* t.delivered).toEqual([])
      expect(report).toMatchObject({ signals: { SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 }, survivors: [1] })
    }))

  it.effect("signals each job-control group of the session, and nothing outside it", () =>
    Effect.gen(function*() {
      const jobA = fakeProcess(5010, { sid: 5000 })
      const jobB = fakeProcess(5020, { sid: 5000 })
      const stranger = fakeProcess(6000)
      const t = yield* setup({ table: [leader, jobA, jobB, stranger], onSignal: obedient })
      const report = yield* finishesAtOnce(t.stopOne())
      expect((yield* t.requested).map((r) => `${r.signal} ${r.target}`).sort()).toEqual(
        ["SIGCONT -5000", "SIGCONT -5010", "SIGCONT -5020", "SIGTERM -5000", "SIGTERM -5010", "SIGTERM -5020"]
      )
      expect(report).toMatchObject({ members: 3, signals: { SIGTERM: 3 }, escaped: [] })
    }))

  it.effect("signals a process that left the session by pid, found by its shell id, and reports it", () =>
    Effect.gen(function*() {
      // in a session whose leader is gone: who else is in its group, the stop cannot tell
      const escaper = fakeProcess(5100, { ppid: 1, startTime: 20, sid: 5090, pgid: 5090 })
      const otherShell = fakeProcess(5200, { startTime: 20 })
      const olderWithSameTag = fakeProcess(5300, { startTime: 5 })
      const t = yield* setup({
        table: [leader, escaper, otherShell, olderWithSameTag],
        shellIds: new Map([[5000, "corral-a"], [5100, "corral-a"], [5200, "corral-b"], [5300, "corral-a"]]),
        onSignal: obedient
      })
      const report = yield* finishesAtOnce(t.stopOne())
      expect((yield* t.requested).map((r) => `${r.signal} ${r.target}`).sort()).toEqual(
        ["SIGCONT -5000", "SIGCONT 5100", "SIGTERM -5000", "SIGTERM 5100"]
      )
      expect(report).toMatchObject({ members: 2, escaped: [5100], escalated: false })
    }))

  it.effect("signals a group in a session a member leads once, by group: everyone in it descends from that leader", () =>
    Effect.gen(function*() {
      const sessionLeader = fakeProcess(5100, { ppid: 5000, startTime: 20 })
      const inItsGroup = [5101, 5102, 5103].map((pid) => fakeProcess(pid, { ppid: 5100, pgid: 5100, sid: 5100, startTime: 20 }))
      const ownGroup = fakeProcess(5104, { ppid: 5100, pgid: 5104, sid: 5100, startTime: 20 })
      const t = yield* setup({ table: [leader, sessionLeader, ...inItsGroup, ownGroup], onSignal: obedient })
      const report = yield* finishesAtOnce(t.stopOne())
      expect((yield* t.requested).map((r) => `${r.signal} ${r.target}`).sort()).toEqual(
        ["SIGCONT -5000", "SIGCONT -5100", "SIGCONT -5104", "SIGTERM -5000", "SIGTERM -5100", "SIGTERM -5104"]
      )
      expect(report).toMatchObject({ members: 6, escaped: [5100, 5101, 5102, 5103, 5104], escalated: false })
    }))

  it.effect("escalates on an escaper that ignores SIGTERM, by pid", () =>
    Effect.gen(function*() {
      const escaper = fakeProcess(5100, { ppid: 1, startTime: 20, sid: 5090, pgid: 5090 })
      const onSignal = (script: TestScript, t: number, signal: Signal) =>
        signal === "SIGTERM" && t === -5000 || signal === "SIGKILL" ? vanish(script, t) : Effect.void
      const t = yield* setup({ table: [leader, escaper], shellIds: new Map([[5100, "corral-a"]]), onSignal })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE)
      const report = yield* Fiber.join(fiber)
      expect(kills(yield* t.requested).map((r) => r.target)).toEqual([5100])
      expect(report).toMatchObject({ escalated: true, escaped: [5100], survivors: [] })
    }))
})

describe("GroupStop: a member that leaves its group between the scan and the signal", () => {
  /**
   * A `setsid` right after the scan read it in the shell's group: the
   * shell's leader already gone, that group is empty when the signal comes.
   */
  const setup = (onSignal: (script: TestScript, target: number, signal: Signal) => Effect.Effect<void>) =>
    Effect.gen(function*() {
      const base = yield* makeTestScript([fakeProcess(5001, { ppid: 1, pgid: 5000, sid: 5000, startTime: 20, comm: "setsid" })])
      const script: TestScript = { ...base, onSignal: (t, s) => onSignal(base, t, s) }
      const inner = yield* Effect.provide(ProcessTable, ProcessTable.layerTest(script))
      let moved = false
      const setsidAfter = (scan: Effect.Effect<ReadonlyArray<ProcessInfo>>) =>
        Effect.tap(scan, () => {
          if (moved) return Effect.void
          moved = true
          return Ref.update(base.processes, (ps) => ps.map((p) => ({ ...p, pgid: 5001, sid: 5001, comm: "sleep" })))
        })
      const layer = Layer.succeed(ProcessTable, { ...inner, scan: setsidAfter(inner.scan), scanSince: (since) => setsidAfter(inner.scanSince(since)) })
      const limits = Limits.layerWith({ grace: Duration.millis(GRACE), killTimeout: Duration.millis(KILL_TIMEOUT) })
      return {
        stop: Effect.provide(GroupStop.stopGroup(target), Layer.merge(layer, limits)),
        sent: Effect.map(Ref.get(base.signals), (all) => all.map((s) => `${s.signal} ${s.target}`))
      }
    })

  it.effect("gets the first signal by pid, once its group turns out empty", () =>
    Effect.gen(function*() {
      const t = yield* setup((script, target, signal) => signal === "SIGTERM" && target === 5001 ? vanish(script, target) : Effect.void)
      const report = yield* finishesAtOnce(t.stop)
      expect((yield* t.sent).slice(0, 2)).toEqual(["SIGTERM -5000", "SIGTERM 5001"])
      expect(report).toMatchObject({ escalated: false, escaped: [5001], survivors: [] })
    }))

  it.effect("ignoring it, is killed where it is now: the kill does not go on striking the group it left", () =>
    Effect.gen(function*() {
      const t = yield* setup((script, target, signal) => signal === "SIGKILL" ? vanish(script, target) : Effect.void)
      const fiber = yield* Effect.fork(t.stop)
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      const report = yield* Fiber.join(fiber)
      expect((yield* t.sent).filter((s) => s.startsWith("SIGKILL"))).toEqual(["SIGKILL -5001"])
      expect(report).toMatchObject({ escalated: true, escaped: [5001], survivors: [] })
    }))
})

describe("GroupStop.stopGroups", () => {
  const session = (sid: number) => [fakeProcess(sid), fakeProcess(sid + 1, { pgid: sid, sid })]
  const targetOf = (sid: number): GroupStop.StopTarget => ({ pgid: sid, sid, startTime: 10 })

  /** Scans made by a stubborn stop of `sids`, to its end. */
  const scansFor = (sids: ReadonlyArray<number>) =>
    Effect.gen(function*() {
      const t = yield* setup({ table: sids.flatMap(session) })
      const fiber = yield* Effect.fork(t.stop(sids.map(targetOf)))
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      const reports = yield* Fiber.join(fiber)
      return { scans: yield* t.scans, reports, requested: yield* t.requested }
    })

  it.effect("a scripted member whose pid is this process's real one is a member all the same: the table says which pid is its own", () =>
    Effect.gen(function*() {
      // the test worker's own pid once took member 7001 of such a stop out of its report, whenever the two met
      const sid = process.pid - 1
      const { reports } = yield* scansFor([sid])
      expect(reports.map((r) => r.survivors)).toEqual([[sid, process.pid]])
    }))

  it.effect("scans the whole table only to begin, to freeze before the first SIGKILL and to report survivors, however many groups it stops", () =>
    Effect.gen(function*() {
      // between those, each tick re-reads only the members it knows
      const one = yield* scansFor([5000])
      const many = yield* scansFor([5000, 6000, 7000, 8000])
      expect(one.scans).toBe(3)
      expect(many.scans).toBe(one.scans)
      expect(many.reports.map((r) => [r.pgid, r.signals.SIGKILL, r.survivors])).toEqual([
        [5000, ROUNDS, [5000, 5001]],
        [6000, ROUNDS, [6000, 6001]],
        [7000, ROUNDS, [7000, 7001]],
        [8000, ROUNDS, [8000, 8001]]
      ])
    }))

  /** Group 5000 ignores SIGTERM, group 6000 exits on it; both stopped together, past the kill timeout. */
  const stubbornBesideObedient = Effect.gen(function*() {
    const onSignal = (script: TestScript, t: number, signal: Signal) =>
      signal === "SIGTERM" && t === -6000 ? vanish(script, t) : Effect.void
    const t = yield* setup({ table: [...session(5000), ...session(6000)], onSignal })
    const fiber = yield* Effect.fork(t.stop([targetOf(5000), targetOf(6000)]))
    yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
    const [stubborn, obeying] = yield* Fiber.join(fiber)
    return { stubborn: stubborn!, obeying: obeying!, requested: yield* t.requested }
  })

  it.effect("stops each group on its own: an obedient group is not sent SIGKILL", () =>
    Effect.gen(function*() {
      const { obeying, requested, stubborn } = yield* stubbornBesideObedient
      expect(stubborn).toMatchObject({ escalated: true, survivors: [5000, 5001] })
      expect(obeying).toMatchObject({ escalated: false, survivors: [], signals: { SIGKILL: 0 } })
      expect(kills(requested).every((r) => r.target === -5000)).toBe(true)
    }))

  it.effect("gives each group its own duration: an obedient group's ends when it emptied, not with the batch", () =>
    Effect.gen(function*() {
      const { obeying, stubborn } = yield* stubbornBesideObedient
      expect(obeying.durationMs).toBe(0)
      expect(stubborn.durationMs).toBe(GRACE + KILL_TIMEOUT)
    }))

  it.effect("sends the first signal, within the grace, to a member first seen after it was sent", () =>
    Effect.gen(function*() {
      // the leader's TERM handler forks a cleanup child into the group, then exits; the child obeys TERM
      const cleanup = fakeProcess(5002, { pgid: 5000, sid: 5000, ppid: 5000, startTime: 11 })
      const onSignal = (script: TestScript, t: number, signal: Signal) =>
        signal !== "SIGTERM"
          ? Effect.void
          : t === -5000
          ? Ref.update(script.processes, (all) => [...all.filter((p) => p.pgid !== 5000), cleanup])
          : vanish(script, t)
      const t = yield* setup({ table: [leader, worker], onSignal })
      const fiber = yield* Effect.fork(t.stopOne())
      yield* TestClock.adjust(GRACE / 2)
      expect(yield* isDone(fiber)).toBe(true)
      const report = yield* Fiber.join(fiber)
      expect(yield* t.delivered).toEqual(["SIGTERM -5000", "SIGCONT -5000", "SIGTERM 5002", "SIGCONT 5002"])
      expect(report).toMatchObject({ escalated: false, killed: 0, survivors: [] })
      expect(report.durationMs).toBeLessThan(GRACE)
    }))

  it.effect("stopGroup gives the report stopGroups gives for one target", () =>
    Effect.gen(function*() {
      const t = yield* setup({ table: [leader, worker], onSignal: obedient })
      const single = yield* finishesAtOnce(t.stopOne())
      const u = yield* setup({ table: [leader, worker], onSignal: obedient })
      const [batch] = yield* finishesAtOnce(u.stop([target]))
      expect(single).toEqual(batch)
    }))
})

/** A directory that plays a cgroup's files, removed with the test's scope. */
const cellDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "corral-cgroup-"))),
  (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
)

/** A scripted table of `processes` whose SIGKILL ends its target and empties the cell `dir` as the kernel counts it. */
const emptiedByKill = (dir: string, processes: ReadonlyArray<ProcessInfo>) =>
  Effect.map(makeTestScript(processes), (base): TestScript => ({
    ...base,
    onSignal: (t, signal) =>
      signal === "SIGKILL"
        ? Effect.zipRight(vanish(base, t), Effect.sync(() => fs.writeFileSync(path.join(dir, "cgroup.events"), "populated 0\nfrozen 0\n")))
        : Effect.void
  }))

describe("GroupStop: a cgroup", () => {
  // A directory plays the cgroup's two files; the scripted table plays the processes.
  it.scoped("is not taken for empty while the kernel says it is populated: a hopper's child is born after the listing, its parent dead before it is read", () =>
    Effect.gen(function*() {
      const dir = yield* cellDirectory
      fs.writeFileSync(path.join(dir, "cgroup.events"), "populated 1\nfrozen 0\n")
      fs.writeFileSync(path.join(dir, "cgroup.procs"), "5001\n")
      // 5001 is listed but already gone when read; its child 5002 was born after the listing
      const child = fakeProcess(5002, { pgid: 5000, sid: 5000, ppid: 5001 })
      const script = yield* emptiedByKill(dir, [child])
      const scripted = ProcessTable.layerTest(script)
      const racing = Layer.effect(
        ProcessTable,
        Effect.map(ProcessTable, (table) =>
          ProcessTable.of({
            ...table,
            lookup: (pid) =>
              Effect.tap(table.lookup(pid), () => Effect.sync(() => pid === 5001 && fs.writeFileSync(path.join(dir, "cgroup.procs"), "5002\n")))
          }))
      ).pipe(Layer.provide(scripted))
      const limits = Limits.layerWith({ grace: Duration.millis(GRACE), killTimeout: Duration.millis(KILL_TIMEOUT) })
      const fiber = yield* Effect.fork(
        GroupStop.stopGroup({ ...target, cgroup: dir }).pipe(Effect.provide(Layer.merge(racing, limits)))
      )
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      const report = yield* Fiber.join(fiber)
      expect(report.members).toBe(1)
      expect(report.escalated).toBe(true)
      expect(report.survivors).toEqual([])
      expect((yield* Ref.get(script.signals)).map((s) => `${s.signal} ${s.target}`)).toContain("SIGKILL -5000")
    }))

  it.scoped("is struck by one kill round: members that take long to die are left to the kernel, not struck again", () =>
    Effect.gen(function*() {
      const dir = yield* cellDirectory
      fs.writeFileSync(path.join(dir, "cgroup.events"), "populated 1\nfrozen 0\n")
      fs.writeFileSync(path.join(dir, "cgroup.procs"), "5000\n5001\n")
      // SIGKILL takes 100 ms to end them (a thousand exiting at once)
      const script = yield* makeTestScript([leader, worker])
      const limits = Limits.layerWith({ grace: Duration.millis(GRACE), killTimeout: Duration.millis(KILL_TIMEOUT) })
      const fiber = yield* Effect.fork(
        GroupStop.stopGroup({ ...target, cgroup: dir }).pipe(Effect.provide(Layer.merge(ProcessTable.layerTest(script), limits)))
      )
      yield* TestClock.adjust(GRACE + 100)
      yield* Ref.set(script.processes, [])
      fs.writeFileSync(path.join(dir, "cgroup.procs"), "")
      fs.writeFileSync(path.join(dir, "cgroup.events"), "populated 0\nfrozen 0\n")
      yield* TestClock.adjust(10)
      const report = yield* Fiber.join(fiber)
      expect(fs.readFileSync(path.join(dir, "cgroup.kill"), "utf8")).toBe("1")
      expect((yield* Ref.get(script.signals)).filter((s) => s.signal === "SIGKILL").map((s) => s.target)).toEqual([-5000])
      expect(report).toMatchObject({ escalated: true, killed: 2, survivors: [] })
      expect(report.durationMs).toBeGreaterThanOrEqual(GRACE + 100)
    }))

  it.scoped("once struck by the kill, is rechecked by its populated flag alone: a check does not list its dying members", () =>
    Effect.gen(function*() {
      const dir = yield* cellDirectory
      fs.writeFileSync(path.join(dir, "cgroup.events"), "populated 1\nfrozen 0\n")
      fs.writeFileSync(path.join(dir, "cgroup.procs"), "5000\n5001\n")
      // the kill empties the cell as the kernel counts it; the listing left as it was would keep a lister waiting
      const script = yield* emptiedByKill(dir, [leader, worker])
      const limits = Limits.layerWith({ grace: Duration.millis(GRACE), killTimeout: Duration.millis(KILL_TIMEOUT) })
      const fiber = yield* Effect.fork(
        GroupStop.stopGroup({ ...target, cgroup: dir }).pipe(Effect.provide(Layer.merge(ProcessTable.layerTest(script), limits)))
      )
      yield* TestClock.adjust(GRACE + 1)
      const report = yield* Fiber.join(fiber)
      expect(report).toMatchObject({ escalated: true, killed: 2, survivors: [] })
      expect(report.durationMs).toBeLessThanOrEqual(GRACE + 1)
      expect((yield* Ref.get(script.signals)).filter((s) => s.signal === "SIGKILL")).toHaveLength(1)
    }))
})

describe("GroupStop: a cgroup's members that got the first signal at once", () => {
  // The group 5000 got SIGTERM and SIGCONT at once (`signalAtOnce`) while the cell listed 5000, 5001 and 5002;
  // 5002 had left the group (setsid), so that signal missed it.
  const inGroup = [leader, worker]
  const outside = fakeProcess(5002, { pgid: 5002, sid: 5002, ppid: 5000 })
  const sentAtOnce = new Map([[5000, new Set([5000, 5001, 5002])]])

  /** A directory playing the cell's two files, kept in step with the scripted table. */
  const cell = (script: TestScript) =>
    Effect.gen(function*() {
      const dir = yield* cellDirectory
      const sync = Effect.flatMap(Ref.get(script.processes), (all) =>
        Effect.sync(() => {
          fs.writeFileSync(path.join(dir, "cgroup.procs"), all.map((p) => `${p.pid}\n`).join(""))
          fs.writeFileSync(path.join(dir, "cgroup.events"), `populated ${all.length > 0 ? 1 : 0}\nfrozen 0\n`)
        }))
      yield* sync
      return { dir, sync }
    })

  /** Stops the cell with the table given; `obeys`: the pids that die of SIGTERM. Counts the table's single lookups. */
  const stopCell = (table: ReadonlyArray<ProcessInfo>, obeys: ReadonlyArray<number>, grace = GRACE, reached = sentAtOnce) =>
    Effect.gen(function*() {
      const script = yield* makeTestScript(table)
      const { dir, sync } = yield* cell(script)
      const lookups: Array<number> = []
      const scripted: TestScript = {
        ...script,
        onSignal: (t, signal) =>
          signal === "SIGKILL" || (signal === "SIGTERM" && obeys.includes(t)) ? Effect.zipRight(vanish(script, t), sync) : Effect.void
      }
      const counting = Layer.effect(
        ProcessTable,
        Effect.map(ProcessTable, (inner) => ProcessTable.of({ ...inner, lookup: (pid) => Effect.zipRight(Effect.sync(() => lookups.push(pid)), inner.lookup(pid)) }))
      ).pipe(Layer.provide(ProcessTable.layerTest(scripted)))
      const limits = Limits.layerWith({ grace: Duration.millis(grace), killTimeout: Duration.millis(KILL_TIMEOUT) })
      const fiber = yield* Effect.fork(
        GroupStop.stopGroup({ ...target, cgroup: dir }, { sentAtOnce: reached }).pipe(Effect.provide(Layer.merge(counting, limits)))
      )
      // what was sent, but the probes (signal 0) of whether the group still has anyone
      const sent = Effect.map(Ref.get(script.signals), (all) => all.filter((s) => s.signal !== 0).map((s) => `${s.signal} ${s.target}`))
      return { fiber, lookups, sent, die: (pid: number) => Effect.zipRight(vanish(script, pid), sync) }
    })

  it.scoped("the ones that die of it are never read: an obedient group costs no lookup", () =>
    Effect.gen(function*() {
      // 5002 died of the signal sent at once before the stop's scan; the group's two take 3 ms more
      const { die, fiber, lookups } = yield* stopCell(inGroup, [])
      yield* TestClock.adjust(3)
      yield* die(-5000)
      yield* TestClock.adjust(10)
      const report = yield* Fiber.join(fiber)
      expect(report).toMatchObject({ members: 3, escalated: false, survivors: [] })
      expect(lookups).toEqual([])
    }))

  it.scoped("one outside the group is read, and sent SIGTERM by pid, as soon as its group is empty", () =>
    Effect.gen(function*() {
      // the group died of the signal sent at once; the one it missed is still there
      const { fiber, lookups, sent } = yield* stopCell([outside], [5002])
      yield* TestClock.adjust(0)
      expect(yield* sent).toEqual(["SIGTERM 5002", "SIGCONT 5002"])
      yield* TestClock.adjust(1)
      const report = yield* Fiber.join(fiber)
      expect(lookups).toEqual([5002])
      expect(report).toMatchObject({ escalated: false, escaped: [5002], survivors: [], durationMs: 1 })
    }))

  it.scoped("one outside a group that lives on (its members ignore SIGTERM) is read once the group has held steady for 5 ms", () =>
    Effect.gen(function*() {
      const { fiber, sent } = yield* stopCell([...inGroup, outside], [5002])
      yield* TestClock.adjust(4)
      expect(yield* sent).toEqual([])
      yield* TestClock.adjust(1)
      expect(yield* sent).toEqual(["SIGTERM 5002", "SIGCONT 5002"])
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      const report = yield* Fiber.join(fiber)
      // the group's own two: SIGKILL at the end of the grace, never a second SIGTERM
      expect(report).toMatchObject({ escalated: true, killed: 2, escaped: [5002], survivors: [] })
      expect(report.signals.SIGTERM).toBe(1 + 1)
    }))

  /** `count` members of the group besides its leader, each dying of the signal a step after the one before. */
  const dyingOneByOne = (count: number) =>
    Array.from({ length: count }, (_, i) => fakeProcess(5100 + i, { pgid: 5000, sid: 5000, ppid: 5000 }))

  const stopWhileDying = (count: number, everyMs: number, grace: number) =>
    Effect.gen(function*() {
      const dying = dyingOneByOne(count)
      const table = [leader, ...dying, outside]
      const stop = yield* stopCell(table, [], grace, new Map([[5000, new Set(table.map((p) => p.pid))]]))
      for (const p of dying) {
        yield* TestClock.adjust(everyMs)
        yield* stop.die(p.pid)
      }
      return stop
    })

  it.scoped("members still dying of the signal are not read while they die: once those left hold steady, they are", () =>
    Effect.gen(function*() {
      // one dies every 3 ms for 36 ms, never 5 ms steady; the leader ignores SIGTERM
      const { fiber, lookups, sent } = yield* stopWhileDying(12, 3, GRACE)
      expect(yield* sent).toEqual([])
      // two checks (10 ms apart by now) see the same members: well before a quarter of the grace
      yield* TestClock.adjust(20)
      expect(yield* sent).toEqual(["SIGTERM 5002", "SIGCONT 5002"])
      expect([...lookups].sort((a, b) => a - b)).toEqual([5000, 5002])
      yield* TestClock.adjust(GRACE + KILL_TIMEOUT)
      expect(yield* Fiber.join(fiber)).toMatchObject({ escaped: [5002], survivors: [] })
    }))

  it.scoped("with a grace under 20 ms, one outside a group that keeps changing is read at the grace's end, sent SIGTERM before the kill and reported", () =>
    Effect.gen(function*() {
      const { fiber, sent } = yield* stopWhileDying(7, 1, 8)
      expect(yield* sent).toEqual([])
      yield* TestClock.adjust(1 + KILL_TIMEOUT)
      const report = yield* Fiber.join(fiber)
      const all = yield* sent
      expect(all.slice(0, 2)).toEqual(["SIGTERM 5002", "SIGCONT 5002"])
      // it leads a session of its own: the kill reaches it by its group
      expect(all).toEqual(expect.arrayContaining(["SIGKILL -5000", "SIGKILL -5002"]))
      expect(report).toMatchObject({ escalated: true, escaped: [5002], survivors: [] })
    }))
})

/**
 * A stand-in for a group whose leader exits a real turn of the event loop
 * after the look begins (its cgroup is never read): `listed` should count
 * anew at each reading, so that the group is still dying.
 */
const dyingGroup = (
  closed: Deferred.Deferred<void>,
  emptied: () => boolean,
  listed: () => number,
  onUnpopulated?: GroupStop.OnUnpopulated
): GroupStop.ReachedGroup => ({
  target: { ...target, cgroup: "/nonexistent/corral-look" },
  reached: new Set([5000, 5001]),
  onLeaderExit: (f) => {
    const later = setImmediate(f)
    return () => clearImmediate(later)
  },
  emptied,
  groupAlive: Effect.succeed(true),
  listed,
  closed: Deferred.await(closed),
  onUnpopulated
})

/** A cell's word that it emptied, given by the test: `tell()` calls back whoever waits for it. */
const cellWord = () => {
  const waiting = new Set<() => void>()
  return {
    onUnpopulated: (f: () => void): (() => void) => {
      waiting.add(f)
      return () => void waiting.delete(f)
    },
    waiting: () => waiting.size,
    tell: () => [...waiting].forEach((f) => f())
  }
}

/** Resolves once `f` holds, checked at each turn of the event loop (at most 2 s). */
const turnsUntil = (f: () => boolean) =>
  Effect.promise(async () => {
    const until = Date.now() + 2_000
    while (!f() && Date.now() < until) await new Promise((resolve) => setImmediate(resolve))
  })

describe("GroupStop.firstLook", () => {
  it.live("a group whose leader went first, in a cell that tells when it empties, is read once at the exit, then not until the cell's word", () =>
    Effect.gen(function*() {
      let empty = false
      let readings = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const word = cellWord()
      const dying = dyingGroup(closed, () => empty, () => ++readings, word.onUnpopulated)
      const look = yield* Effect.fork(
        GroupStop.firstLook([dying], { first: "SIGTERM", began: Date.now(), grace: 4_000 }, (i) => settled.push(i))
      )
      yield* turnsUntil(() => word.waiting() > 0)
      expect(word.waiting(), "waiting for the cell's word after the leader's exit").toBe(1)
      expect(readings, "the listing read at the exit").toBe(1)
      empty = true
      word.tell()
      expect(settled, "settled at the word").toEqual([0])
      yield* Fiber.join(look)
      expect(readings, "no reading of the listing after the exit's").toBe(1)
      expect(word.waiting(), "the wait ended").toBe(0)
    }))

  it.live("without the cell's word, a group whose listing has not changed since its leader's exit (an escaper holds the cell) leaves the look at its first check", () =>
    Effect.gen(function*() {
      let readings = 0
      let checks = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const word = cellWord()
      // two processes listed at every reading, never empty: what an escaper outside the group leaves
      const held: GroupStop.ReachedGroup = {
        ...dyingGroup(closed, () => false, () => (++readings, 2), word.onUnpopulated),
        groupAlive: Effect.sync(() => (++checks, true))
      }
      yield* GroupStop.firstLook([held], { first: "SIGTERM", began: Date.now(), grace: 4_000 }, (i) => settled.push(i))
      expect(settled).toEqual([])
      expect(checks, "checks of the group: one, after the wait (a check at the exit would make two)").toBe(1)
      expect(readings, "the exit's reading and the first check's").toBe(2)
      expect(word.waiting(), "the wait for the word ended").toBe(0)
    }))

  it.live("a caller interrupted while the look waits for the cell's word returns at once; the wait is cancelled and the word settles nothing", () =>
    Effect.gen(function*() {
      let empty = false
      let readings = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const word = cellWord()
      const dying = dyingGroup(closed, () => empty, () => ++readings, word.onUnpopulated)
      const look = yield* Effect.fork(
        GroupStop.firstLook([dying], { first: "SIGTERM", began: Date.now(), grace: 4_000 }, (i) => settled.push(i))
      )
      yield* turnsUntil(() => word.waiting() > 0)
      yield* Fiber.interrupt(look)
      expect(word.waiting(), "the wait for the word, cancelled").toBe(0)
      empty = true
      word.tell()
      // past the wait's own 5 ms: no check either
      yield* Effect.sleep(Duration.millis(20))
      expect(settled).toEqual([])
      expect(readings, "only the exit's reading").toBe(1)
    }))

  it.effect("reads a dying group again 1 ms after the read its pipes' close started, not a quarter of its age later", () =>
    Effect.gen(function*() {
      let empty = false
      let readings = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const dying = dyingGroup(closed, () => empty, () => ++readings)
      const look = yield* Effect.fork(
        GroupStop.firstLook([dying], { first: "SIGTERM", began: 0, grace: 4_000 }, (i) => settled.push(i))
      )
      // the leader's exit, a real turn of the event loop later
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      yield* TestClock.adjust(200)
      yield* Deferred.succeed(closed, undefined)
      yield* TestClock.adjust(0)
      expect(readings, "a reading at the close").toBeGreaterThan(0)
      expect(settled).toEqual([])
      empty = true
      yield* TestClock.adjust(1)
      expect(settled, "settled 1 ms after the close").toEqual([0])
      yield* Fiber.join(look)
    }))

  it.effect("reads a dying group at once when its cgroup tells it emptied, its pipes still open; without the hint, the pauses are as long as ever", () =>
    Effect.gen(function*() {
      let empty = false
      let readings = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const word = cellWord()
      const dying = dyingGroup(closed, () => empty, () => ++readings, word.onUnpopulated)
      const look = yield* Effect.fork(
        GroupStop.firstLook([dying], { first: "SIGTERM", began: 0, grace: 4_000 }, (i) => settled.push(i))
      )
      // the leader's exit, the read then, and the wait for the word (real time: 5 ms) that does not come; then the first check
      yield* turnsUntil(() => readings >= 2)
      // 200 ms in, while the pipes' close is still to come, the pauses are 50 ms long
      yield* TestClock.adjust(200)
      const before = readings
      yield* TestClock.adjust(30)
      expect(readings - before, "readings in 30 ms while the close is still to come").toBeLessThanOrEqual(1)
      empty = true
      word.tell()
      yield* TestClock.adjust(0)
      expect(settled, "settled at the hint, no time later").toEqual([0])
      yield* Fiber.join(look)
    }))

  // A group whose leader has exited and whose cell keeps changing: the look watches it until a quarter into the grace.
  // The group is a stand-in (its cgroup is never read here): what is tested is the look's own waiting.
  it.live("a caller interrupted while the look watches a dying group returns at once, and the look stops reading it", () =>
    Effect.gen(function*() {
      let readings = 0
      const settled: Array<number> = []
      const closed = yield* Deferred.make<void>()
      const dying = dyingGroup(closed, () => false, () => ++readings)
      const look = yield* Effect.fork(
        GroupStop.firstLook([dying], { first: "SIGTERM", began: Date.now(), grace: 4_000 }, (i) => settled.push(i))
      )
      yield* Effect.sleep(Duration.millis(60))
      expect(readings, "the look read the group as it died").toBeGreaterThan(1)
      const interruptedAt = Date.now()
      yield* Fiber.interrupt(look)
      expect(Date.now() - interruptedAt, "the interrupted look's return (ms)").toBeLessThan(100)
      const atInterrupt = readings
      yield* Effect.sleep(Duration.millis(40))
      expect(readings, "readings after the interrupt").toBe(atInterrupt)
      expect(settled).toEqual([])
    }))
})
