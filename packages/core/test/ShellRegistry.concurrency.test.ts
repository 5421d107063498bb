/**
 * Races with real processes: kill while exiting, double kill, kill during
 * start, shutdown during start, 100 concurrent starts and kills, and a
 * shutdown that stops every shell at once with one table scan per tick.
 */
import { ShellRegistry } from "@corral/core"
import type { ShellInfo, ShellStatus } from "@corral/core"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import {
  awaitEvent,
  countingTable,
  eventsOf,
  nothingLeft,
  ownShellPrefix,
  recordEvents,
  registryLayer,
  shellProcesses
} from "./fixtures/registry/harness.js"

const owner = "race-test"
const sleeper = { command: ["sleep", "300"] }

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

const finalStatuses = (registry: ShellRegistry["Type"], shells: ReadonlyArray<ShellInfo>) =>
  Effect.forEach(shells, (s) => Effect.map(registry.info(s.id), (i) => i.status))

describe("kill", () => {
  it.live("while the shell is exiting by itself settles once, and only reports Killed if a signal was sent", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      for (let round = 0; round < 20; round++) {
        const shell = yield* registry.start({ command: "echo bye" }, { owner })
        // `bye` is the last thing the shell does: the kill lands around its exit
        yield* registry.output(shell.id, { waitFor: "^bye$", waitMs: 10_000 })
        const report = yield* registry.kill(shell.id, { owner })
        const status = yield* Effect.map(registry.info(shell.id), (i) => i.status)
        expect(["Exited", "Killed"]).toContain(status._tag)
        if (status._tag === "Killed") expect(report.signals.SIGTERM + report.signals.SIGKILL).toBeGreaterThan(0)
        else expect(status).toEqual({ _tag: "Exited", code: 0 })
        yield* awaitEvent(seen, shell.id, status._tag === "Killed" ? "Killed" : "Exited")
        expect(eventsOf(seen, shell.id)).toHaveLength(2)
      }
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 32 } }))))

  it.live("after the shell ended by itself returns the report of its end and leaves its status alone", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start({ command: "exit 4" }, { owner })
      yield* awaitEvent(seen, shell.id, "Exited")
      const report = yield* registry.kill(shell.id, { owner })
      expect(report).toMatchObject({ members: 0, escalated: false, survivors: [] })
      expect(report.signals).toEqual({ SIGTERM: 0, SIGCONT: 0, SIGKILL: 0 })
      expect(yield* Effect.map(registry.info(shell.id), (i) => i.status)).toEqual({ _tag: "Exited", code: 4 })
      expect(eventsOf(seen, shell.id)).toEqual(["Started", "Exited"])
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))

  it.live("twice, at once or later, returns the same report and stops once", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const shell = yield* registry.start({ command: "trap '' TERM; echo armed; exec sleep 300" }, { owner })
      yield* registry.output(shell.id, { waitFor: "^armed$", waitMs: 10_000 })
      const [first, second] = yield* Effect.all([registry.kill(shell.id, { owner }), registry.kill(shell.id, { owner })], {
        concurrency: "unbounded"
      })
      const third = yield* registry.kill(shell.id, { owner })
      expect(second).toEqual(first)
      expect(third).toEqual(first)
      expect(first.signals.SIGTERM).toBe(1)
      expect(first.escalated).toBe(true)
      yield* awaitEvent(seen, shell.id, "Killed")
      expect(eventsOf(seen, shell.id)).toEqual(["Started", "Killed"])
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { grace: Duration.millis(300) } }))))

  it.live("during start stops the shell, and start still returns it", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      for (let round = 1; round <= 10; round++) {
        const id = `s${round}`
        const starting = yield* Effect.fork(registry.start(sleeper, { owner }))
        // a tight retry: the kill lands as soon as the id exists, while start is still finishing
        const killWhenKnown: Effect.Effect<unknown> = registry.kill(id, { owner }).pipe(
          Effect.catchTag("UnknownShell", () => Effect.zipRight(Effect.yieldNow(), Effect.suspend(() => killWhenKnown))),
          Effect.orDie
        )
        yield* killWhenKnown
        const started = yield* Fiber.join(starting)
        expect(started.id).toBe(id)
        expect(yield* Effect.map(registry.info(id), (i) => i.status)).toMatchObject({ _tag: "Killed", by: "request" })
        yield* awaitEvent(seen, id, "Killed")
        expect(eventsOf(seen, id)).toEqual(["Started", "Killed"])
        expect(shellProcesses(started.tag)).toEqual([])
      }
    }).pipe(Effect.scoped, Effect.provide(registryLayer())))
})

describe("shutdown", () => {
  it.live("during starts in flight leaves no process, and later starts fail with RegistryClosed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const registry = Context.get(yield* Layer.buildWithScope(registryLayer({ limits: { maxShells: 64 } }), scope), ShellRegistry)
      const seen = yield* recordEvents(registry)
      const starts = yield* Effect.fork(
        Effect.forEach(Array.from({ length: 30 }), () => Effect.either(registry.start(sleeper, { owner })), { concurrency: "unbounded" })
      )
      yield* awaitEvent(seen, "s1", "Started")
      yield* Scope.close(scope, Exit.void)
      expect(shellProcesses(ownShellPrefix)).toEqual([])

      const results = yield* Fiber.join(starts)
      const started = results.flatMap((r) => (Either.isRight(r) ? [r.right] : []))
      const refused = results.flatMap((r) => (Either.isLeft(r) ? [r.left._tag] : []))
      expect(started.length).toBeGreaterThan(0)
      expect(new Set(refused)).toEqual(new Set(refused.length > 0 ? ["RegistryClosed"] : []))
      for (const status of yield* finalStatuses(registry, started)) {
        expect(status).toEqual({ _tag: "Killed", signal: "SIGTERM", by: "shutdown" })
      }
      expect(shellProcesses(ownShellPrefix)).toEqual([])
      const late = yield* Effect.flip(registry.start(sleeper, { owner }))
      expect(late._tag).toBe("RegistryClosed")
      expect(late.message).toMatch(/shutting down/)
    }).pipe(Effect.scoped))

  it.live("stops every shell concurrently, sharing one process-table scan per tick", () =>
    Effect.gen(function*() {
      const grace = 300
      const counting = yield* countingTable
      const scope = yield* Scope.make()
      const layer = registryLayer({ table: counting.layer, limits: { grace: Duration.millis(grace) } })
      const registry = Context.get(yield* Layer.buildWithScope(layer, scope), ShellRegistry)
      const seen = yield* recordEvents(registry)
      const shells = yield* Effect.forEach(
        Array.from({ length: 16 }),
        () => registry.start({ command: "trap '' TERM; echo armed; exec sleep 300" }, { owner }),
        { concurrency: 4 }
      )
      for (const shell of shells) yield* registry.output(shell.id, { waitFor: "^armed$", waitMs: 10_000 })

      const scansBefore = yield* Ref.get(counting.scans)
      yield* Scope.close(scope, Exit.void)
      const scans = (yield* Ref.get(counting.scans)) - scansBefore
      expect(shellProcesses(ownShellPrefix)).toEqual([])

      const reports = yield* Effect.forEach(shells, (s) => Effect.map(awaitEvent(seen, s.id, "Killed"), (e) => e.report))
      const statuses: Array<ShellStatus> = yield* finalStatuses(registry, shells)
      for (const status of statuses) expect(status).toEqual({ _tag: "Killed", signal: "SIGKILL", by: "shutdown" })
      for (const report of reports) expect(report).toMatchObject({ escalated: true, members: 1, survivors: [] })
      // one stop for all of them: each group's duration is its own, and each spans the grace once
      for (const report of reports) {
        expect(report.durationMs).toBeGreaterThanOrEqual(grace)
        expect(report.durationMs).toBeLessThan(shells.length * grace)
      }
      const durationMs = Math.max(...reports.map((r) => r.durationMs))
      // a stop polls at least every 10 ms, so a stop per shell would scan at
      // least shells x (duration / 10 ms) times; a shared stop, about
      // duration / 10 ms times (plus one scan per shell when its leader exits)
      const ticks = durationMs / 10
      console.log(`shutdown of ${shells.length} shells: ${durationMs} ms, ${scans} scans, ${ticks} ticks`)
      expect(scans).toBeLessThan(ticks + 2 * shells.length + 10)
      expect(scans).toBeLessThan((shells.length * ticks) / 4)
    }).pipe(Effect.scoped))
})

describe("the shell cap under concurrent starts", () => {
  const startAll = (registry: ShellRegistry["Type"], specs: ReadonlyArray<{ readonly command: ReadonlyArray<string> | string }>) =>
    Effect.map(
      Effect.forEach(specs, (spec) => Effect.either(registry.start(spec, { owner })), { concurrency: "unbounded" }),
      (results) => ({
        started: results.flatMap((r) => (Either.isRight(r) ? [r.right] : [])),
        refused: results.flatMap((r) => (Either.isLeft(r) ? [r.left._tag] : []))
      })
    )

  it.live("of 8 starts at once under a cap of 2, 2 run and 6 are refused", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const { refused, started } = yield* startAll(registry, Array.from({ length: 8 }, () => sleeper))
      console.log(`8 concurrent starts under --max-shells 2: ${started.length} ran`)
      expect(started).toHaveLength(2)
      expect(refused).toEqual(Array.from({ length: 6 }, () => "TooManyShells"))
      expect((yield* registry.list).map((s) => s.id).sort()).toEqual(started.map((s) => s.id).sort())
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 2 } }))))

  it.live("finished shells make room for concurrent starts, and no more than the cap run", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      for (const done of yield* Effect.all([registry.start({ command: "true" }, { owner }), registry.start({ command: "true" }, { owner })])) {
        yield* awaitEvent(seen, done.id, "Exited")
      }
      const { refused, started } = yield* startAll(registry, Array.from({ length: 8 }, () => sleeper))
      expect(started).toHaveLength(2)
      expect(refused).toHaveLength(6)
      expect((yield* registry.list).map((s) => s.id).sort()).toEqual(started.map((s) => s.id).sort())
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 2 } }))))

  it.live("a start that fails gives its slot back", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const failing = yield* startAll(registry, Array.from({ length: 4 }, () => ({ command: ["/nonexistent/corral-test-binary"] })))
      expect(failing.started).toEqual([])
      expect(failing.refused.filter((tag) => tag !== "TooManyShells" && tag !== "SpawnError")).toEqual([])
      // every slot is free again
      yield* registry.start(sleeper, { owner })
      yield* registry.start(sleeper, { owner })
      expect((yield* Effect.flip(registry.start(sleeper, { owner })))._tag).toBe("TooManyShells")
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 2 } }))))
})

describe("100 concurrent starts and kills", () => {
  it.live("each start gets its own id, each kill stops its shell, and nothing is left alive", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const seen = yield* recordEvents(registry)
      const results = yield* Effect.forEach(
        Array.from({ length: 100 }),
        () =>
          Effect.flatMap(
            registry.start(sleeper, { owner }),
            (info) => Effect.map(registry.kill(info.id, { owner }), (report) => ({ info, report }))
          ),
        { concurrency: "unbounded" }
      )
      const ids = results.map((r) => r.info.id)
      expect(new Set(ids)).toEqual(new Set(Array.from({ length: 100 }, (_, i) => `s${i + 1}`)))
      expect(new Set(results.map((r) => r.info.pid)).size).toBe(100)
      for (const { info, report } of results) {
        expect(report.pgid).toBe(info.pid)
        expect(report.survivors).toEqual([])
      }
      for (const status of yield* finalStatuses(registry, results.map((r) => r.info))) {
        expect(status).toMatchObject({ _tag: "Killed", by: "request" })
      }
      expect(shellProcesses(ownShellPrefix)).toEqual([])
      for (const id of ids) yield* awaitEvent(seen, id, "Killed")
      for (const id of ids) expect(eventsOf(seen, id)).toEqual(["Started", "Killed"])
    }).pipe(Effect.scoped, Effect.provide(registryLayer({ limits: { maxShells: 128 } }))))
})
