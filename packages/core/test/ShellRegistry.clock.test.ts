/**
 * Lifetime, retention, the cap, event order and ids, with real processes
 * but test time: every timer the registry sets runs on `TestClock`.
 */
import { ShellRegistry } from "@corral/core"
import type { ShellEvent, TooManyShells, UnknownShell } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import {
  awaitEvent,
  eventually,
  eventsOf,
  idOf,
  nothingLeft,
  ownShellPrefix,
  provideTickingRegistry,
  realSleep,
  recordEvents,
  retentionTimers,
  commandProcesses,
  taggedProcesses,
  ticking,
  timerAt
} from "./fixtures/registry/harness.js"
import { inPidNamespace } from "./helpers.js"

const owner = "clock-test"
const lifetime = Duration.minutes(10)
const retention = Duration.minutes(30)
const sleeper = { command: ["sleep", "300"] }
const quick = { command: ["true"] }

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

/** Advances test time to `instant` (epoch ms on the test clock). */
const advanceTo = (instant: number) => Effect.flatMap(Clock.currentTimeMillis, (now) => TestClock.adjust(instant - now))

describe("lifetime", () => {
  it.effect("stops a shell once its lifetime has passed, not before, and says the lifetime did it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start(sleeper, { owner })
      yield* timerAt(shell.startedAt + Duration.toMillis(lifetime))

      yield* advanceTo(shell.startedAt + Duration.toMillis(lifetime) - 1)
      yield* realSleep(50)
      expect((yield* registry.info(shell.id)).status).toEqual({ _tag: "Running" })

      yield* TestClock.adjust(1)
      const killed = yield* ticking(awaitEvent(seen, shell.id, "Killed"))
      expect(killed.info.status).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "lifetime" })
      expect(killed.info.endedAt! - shell.startedAt).toBeGreaterThanOrEqual(Duration.toMillis(lifetime))
      expect(killed.report.signals.SIGTERM).toBeGreaterThan(0)
      expect(yield* registry.info(shell.id)).toMatchObject({ status: { _tag: "Killed", by: "lifetime" } })
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { lifetime } })))

  it.effect("stops each shell at its own lifetime, in start order, and leaves one that ended before it alone", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const ends = yield* registry.start(quick, { owner })
      yield* awaitEvent(seen, ends.id, "Exited")
      yield* TestClock.adjust(Duration.minutes(1))
      const older = yield* registry.start(sleeper, { owner })
      yield* TestClock.adjust(Duration.minutes(1))
      const younger = yield* registry.start(sleeper, { owner })
      const dueOlder = older.startedAt + Duration.toMillis(lifetime)
      const dueYounger = younger.startedAt + Duration.toMillis(lifetime)
      expect(dueYounger - dueOlder).toBe(Duration.toMillis(Duration.minutes(1)))

      // the first shell's due passes without a stop: it had ended
      yield* timerAt(ends.startedAt + Duration.toMillis(lifetime))
      yield* advanceTo(ends.startedAt + Duration.toMillis(lifetime))
      yield* timerAt(dueOlder)
      yield* advanceTo(dueOlder - 1)
      yield* realSleep(50)
      expect((yield* registry.info(older.id)).status).toEqual({ _tag: "Running" })

      yield* TestClock.adjust(1)
      yield* ticking(awaitEvent(seen, older.id, "Killed"))
      expect((yield* registry.info(younger.id)).status).toEqual({ _tag: "Running" })
      expect(eventsOf(seen, ends.id)).toEqual(["Started", "Exited"])

      yield* timerAt(dueYounger)
      yield* advanceTo(dueYounger)
      const killed = yield* ticking(awaitEvent(seen, younger.id, "Killed"))
      expect(killed.info.status).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "lifetime" })
      expect(killed.info.endedAt! - younger.startedAt).toBeGreaterThanOrEqual(Duration.toMillis(lifetime))
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { lifetime } })))
})

describe("retention", () => {
  it.effect("keeps a finished shell readable for the retention, then drops it with an error that explains why", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const done = yield* registry.start({ command: "echo hello" }, { owner })
      const running = yield* registry.start(sleeper, { owner })
      const exited = yield* awaitEvent(seen, done.id, "Exited")
      const endedAt = exited.info.endedAt!
      yield* timerAt(endedAt + Duration.toMillis(retention))

      yield* advanceTo(endedAt + Duration.toMillis(retention) - 1)
      yield* realSleep(50)
      expect((yield* registry.info(done.id)).status).toEqual({ _tag: "Exited", code: 0 })
      expect((yield* registry.output(done.id, { mode: "all" })).text).toBe("hello\n")

      yield* TestClock.adjust(1)
      yield* awaitEvent(seen, done.id, "Dropped")
      const error = yield* Effect.flip(registry.info(done.id))
      expect(error).toMatchObject({ _tag: "UnknownShell", id: done.id, known: [running.id] } satisfies Partial<UnknownShell>)
      expect(error.message).toContain(`"${done.id}"`)
      expect(error.message).toContain(`known ids: ${running.id}`)
      expect(error.message).toMatch(/dropped 30 ?(m|min|minutes) after/)
      expect(error.message).toMatch(/belong to the process that started them/)
      expect((yield* Effect.flip(registry.output(done.id)))._tag).toBe("UnknownShell")
      expect(yield* Effect.map(registry.list, (all) => all.map((s) => s.id))).toEqual([running.id])
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { retention } })))

  it.effect("explains the retention that is configured, not a fixed 30 min", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const done = yield* registry.start(quick, { owner })
      const exited = yield* awaitEvent(seen, done.id, "Exited")
      yield* timerAt(exited.info.endedAt! + Duration.toMillis(Duration.minutes(5)))
      yield* TestClock.adjust(Duration.minutes(5))
      yield* awaitEvent(seen, done.id, "Dropped")
      const error = yield* Effect.flip(registry.info(done.id))
      expect(error.message).toContain("there are no shells")
      expect(error.message).not.toContain("30 min")
      expect(error.message).toMatch(/\b5 ?(m|min|minutes)\b/)
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { retention: Duration.minutes(5) } })))
})

describe("the cap on running shells", () => {
  it.effect("refuses the 17th start, naming the 16 running shells and pointing at kill", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const running = yield* Effect.forEach(Array.from({ length: 16 }), () => registry.start(sleeper, { owner }))
      const error = yield* Effect.flip(registry.start({ command: "echo one too many" }, { owner }))
      expect(error._tag).toBe("TooManyShells")
      const refused = error as TooManyShells
      expect(refused.limit).toBe(16)
      expect(refused.running.map((s) => s.id)).toEqual(running.map((s) => s.id))
      for (const shell of running) expect(refused.message).toContain(`${shell.id} (sleep 300)`)
      expect(refused.message).toMatch(/\bkill\b/)
      expect((yield* registry.list).length).toBe(16)
    }).pipe(provideTickingRegistry()))

  it.effect("drops finished shells, oldest first, to make room, and refuses only when all are running", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const first = yield* registry.start(quick, { owner })
      const second = yield* registry.start(quick, { owner })
      yield* awaitEvent(seen, first.id, "Exited")
      yield* awaitEvent(seen, second.id, "Exited")
      const third = yield* registry.start(sleeper, { owner })
      expect((yield* registry.list).map((s) => s.id)).toEqual([first.id, second.id, third.id])

      // a start returns once its shell is registered; subscribers get the drop's event a moment later
      const fourth = yield* registry.start(sleeper, { owner })
      expect((yield* registry.list).map((s) => s.id)).toEqual([second.id, third.id, fourth.id])
      yield* awaitEvent(seen, first.id, "Dropped")
      expect(eventsOf(seen, first.id)).toEqual(["Started", "Exited", "Dropped"])
      expect(eventsOf(seen, second.id)).toEqual(["Started", "Exited"])
      const fifth = yield* registry.start(sleeper, { owner })
      yield* awaitEvent(seen, second.id, "Dropped")
      expect(eventsOf(seen, second.id)).toEqual(["Started", "Exited", "Dropped"])
      expect((yield* registry.list).map((s) => s.id)).toEqual([third.id, fourth.id, fifth.id])

      const refused = yield* Effect.flip(registry.start(sleeper, { owner }))
      expect(refused).toMatchObject({ _tag: "TooManyShells", limit: 3 })
      expect((refused as TooManyShells).running.map((s) => s.id)).toEqual([third.id, fourth.id, fifth.id])

      yield* ticking(registry.kill(third.id, { owner }))
      const sixth = yield* registry.start(sleeper, { owner })
      expect((yield* registry.list).map((s) => s.id)).toEqual([fourth.id, fifth.id, sixth.id])
      yield* awaitEvent(seen, third.id, "Dropped")
      expect(eventsOf(seen, third.id)).toEqual(["Started", "Killed", "Dropped"])
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { maxShells: 3 } })))
})

describe("events", () => {
  // a shell's lifecycle begins at its leader's exit; the keeper's, begun at the lifetime, must take over
  // from the one watching the lingering group, and nothing may begin a third
  it.effect.skipIf(!inPidNamespace)(
    "a shell that lingers past its lifetime is stopped once, by the lifetime, then dropped once (orphans a sleep on purpose: needs the PID namespace of `npm test`)",
    () =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const seen = yield* recordEvents(registry)
        const shell = yield* registry.start({ command: "sleep 300 & echo started" }, { owner })
        yield* awaitEvent(seen, shell.id, "Lingering")
        const due = shell.startedAt + Duration.toMillis(lifetime)
        yield* timerAt(due)
        yield* advanceTo(due)
        const killed = yield* ticking(awaitEvent(seen, shell.id, "Killed"))
        expect(killed.info.status).toMatchObject({ _tag: "Killed", by: "lifetime" })
        // the lingering sleep: under pidns, not the namespace's `unshare` and init
        expect(killed.report.members).toBe(1)
        expect(taggedProcesses(shell.tag)).toEqual([])
        yield* retentionTimers([killed.info], retention)
        yield* TestClock.adjust(retention)
        yield* awaitEvent(seen, shell.id, "Dropped")
        yield* realSleep(50)
        expect(eventsOf(seen, shell.id)).toEqual(["Started", "Lingering", "Killed", "Dropped"])
      }).pipe(Effect.scoped, provideTickingRegistry({ limits: { lifetime, retention } }))
  )

  it.effect("every subscriber sees each shell's Started, then Exited or Killed, then Dropped", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const first = yield* recordEvents(registry)
      const second = yield* recordEvents(registry)
      const viaEvents: Array<ShellEvent> = []
      yield* Effect.forkScoped(Stream.runForEach(registry.events, (e) => Effect.sync(() => viaEvents.push(e))))
      // `events` subscribes when its stream starts, on the forked fiber
      yield* realSleep(50)

      const exits = yield* registry.start(quick, { owner })
      const killed = yield* registry.start(sleeper, { owner })
      const outlived = yield* registry.start(sleeper, { owner })
      yield* awaitEvent(first, exits.id, "Exited")
      yield* ticking(registry.kill(killed.id, { owner }))
      yield* timerAt(outlived.startedAt + Duration.toMillis(lifetime))
      // moved first, then ticked: a tick's adjust beside this one could set the clock back (see `ticking`)
      yield* advanceTo(outlived.startedAt + Duration.toMillis(lifetime))
      yield* ticking(awaitEvent(first, outlived.id, "Killed"))
      yield* retentionTimers(first.flatMap((e) => (e._tag === "Exited" || e._tag === "Killed" ? [e.info] : [])), retention)
      yield* TestClock.adjust(retention)
      for (const shell of [exits, killed, outlived]) yield* awaitEvent(first, shell.id, "Dropped")
      yield* awaitEvent(viaEvents, outlived.id, "Dropped")

      for (const seen of [first, second, viaEvents]) {
        expect(eventsOf(seen, exits.id)).toEqual(["Started", "Exited", "Dropped"])
        expect(eventsOf(seen, killed.id)).toEqual(["Started", "Killed", "Dropped"])
        expect(eventsOf(seen, outlived.id)).toEqual(["Started", "Killed", "Dropped"])
      }
      expect(second.map(idOf)).toEqual(first.map(idOf))
      expect(viaEvents.map((e) => e._tag)).toEqual(first.map((e) => e._tag))
      const byWhom = first.flatMap((e) => (e._tag === "Killed" ? [[e.info.id, e.info.status]] : []))
      expect(byWhom).toEqual([
        [killed.id, { _tag: "Killed", signal: "SIGTERM", by: "request" }],
        [outlived.id, { _tag: "Killed", signal: "SIGTERM", by: "lifetime" }]
      ])
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { lifetime, retention } })))
})

describe("ids", () => {
  it.effect("are s1, s2, ... in start order and never reused, even after a shell is dropped", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const firsts = yield* Effect.forEach([1, 2, 3], () => registry.start(quick, { owner }))
      expect(firsts.map((s) => s.id)).toEqual(["s1", "s2", "s3"])
      const exited = yield* Effect.forEach(firsts, (shell) => awaitEvent(seen, shell.id, "Exited"))
      yield* retentionTimers(exited.map((e) => e.info), retention)
      yield* TestClock.adjust(retention)
      for (const shell of firsts) yield* awaitEvent(seen, shell.id, "Dropped")
      expect(yield* registry.list).toEqual([])

      const next = yield* registry.start(quick, { owner })
      expect(next.id).toBe("s4")
      expect(next.tag).toBe(`${process.pid}:s4`)
      const error = yield* Effect.flip(registry.info("s1"))
      expect(error).toMatchObject({ _tag: "UnknownShell", id: "s1", known: ["s4"] })
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { retention } })))
})

describe("an interrupted stop", () => {
  it.effect("runs to its end on test time: the caller returns at once, the grace still ends in SIGKILL, a later kill gets the same report", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start({ command: "trap '' TERM; sleep 300 & wait" }, { owner })
      // its sh and sleep: the trap is set (under pidns, its `unshare` and init are there before the command)
      yield* eventually("the shell's processes", Effect.sync(() => (commandProcesses(shell).length >= 2 ? true : undefined)))
      const caller = yield* Effect.fork(registry.kill(shell.id, { owner }))
      yield* realSleep(50)
      yield* Fiber.interrupt(caller)
      expect((yield* registry.info(shell.id)).status).toEqual({ _tag: "Stopping", by: "request" })
      // no test time has passed: the grace is still running, without any caller
      expect(commandProcesses(shell).length).toBeGreaterThanOrEqual(2)
      const killed = yield* ticking(awaitEvent(seen, shell.id, "Killed"))
      expect(killed.report).toMatchObject({ escalated: true, survivors: [] })
      expect(taggedProcesses(shell.tag)).toEqual([])
      expect(yield* registry.kill(shell.id, { owner })).toEqual(killed.report)
    }).pipe(Effect.scoped, provideTickingRegistry({ limits: { grace: Duration.millis(500) } })))
})
