/**
 * A group's releases as one finalizer, or run by their holder: the order a
 * scope gives its finalizers, synchronous ones without an effect, each run
 * once, many holders' in one pass, and one that throws or dies keeping none
 * of the others from running.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Releases from "../dist/internal/releases.js"

const openReleases = Effect.flatMap(Scope.make(), (scope) => Effect.map(Scope.extend(Releases.make, scope), (releases) => ({ scope, releases })))

describe("Releases", () => {
  it.effect("run at the scope's close, the last added first, synchronous and effectful ones in one sequence", () =>
    Effect.gen(function*() {
      const { releases, scope } = yield* openReleases
      const ran: Array<string> = []
      releases.add(() => void ran.push("first added"))
      releases.add(() => Effect.sync(() => ran.push("an effect")))
      releases.add(() => void ran.push("last added"))
      expect(ran).toEqual([])
      yield* Scope.close(scope, Exit.void)
      expect(ran).toEqual(["last added", "an effect", "first added"])
    }))

  it.effect("an effect that waits holds the ones added before it until it is done", () =>
    Effect.gen(function*() {
      const { releases, scope } = yield* openReleases
      const gate = yield* Deferred.make<void>()
      const ran: Array<string> = []
      releases.add(() => void ran.push("before"))
      releases.add(() => Deferred.await(gate))
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.yieldNow()
      expect(ran).toEqual([])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(closing)
      expect(ran).toEqual(["before"])
    }))

  it.effect("one that throws or dies: the others still run, and the close reports it", () =>
    Effect.gen(function*() {
      const { releases, scope } = yield* openReleases
      const ran: Array<string> = []
      releases.add(() => void ran.push("first"))
      releases.add(() => Effect.dieMessage("an effect that dies"))
      releases.add(() => void ran.push("middle"))
      releases.add(() => {
        throw new Error("a release that throws")
      })
      releases.add(() => void ran.push("last"))
      const exit = yield* Effect.exit(Scope.close(scope, Exit.void))
      expect(ran).toEqual(["last", "middle", "first"])
      expect(Exit.isFailure(exit)).toBe(true)
      const defects = Exit.isFailure(exit) ? [...Cause.defects(exit.cause)].map((d) => String((d as Error).message)) : []
      expect(defects.sort()).toEqual(["a release that throws", "an effect that dies"])
    }))

  it.effect("none added: the close has nothing to run", () =>
    Effect.gen(function*() {
      const { scope } = yield* openReleases
      expect(yield* Effect.exit(Scope.close(scope, Exit.void))).toEqual(Exit.void)
    }))

  it.effect("owned: run once, whoever asks first, and a second run finds nothing left", () =>
    Effect.gen(function*() {
      const owned = Releases.unsafeMakeOwned()
      const ran: Array<string> = []
      owned.add(() => void ran.push("first"))
      owned.add(() => void ran.push("second"))
      expect(owned.unsafeRun()).toBeUndefined()
      yield* Releases.run(owned)
      expect(ran).toEqual(["second", "first"])
    }))

  it.effect("many holders in one pass: what each does at once first, then what is left, each holder's in its order", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const holder = (name: string, waits: boolean) => {
        const owned = Releases.unsafeMakeOwned()
        owned.add(() => void ran.push(`${name}: cell`))
        owned.add(() => waits ? Effect.sync(() => ran.push(`${name}: output`)) : void ran.push(`${name}: output`))
        owned.add(() => void ran.push(`${name}: files`))
        return owned
      }
      const all = [holder("a", true), holder("b", false), holder("c", true)]
      const pass = Releases.runAll(all)
      expect(ran).toEqual([])
      yield* pass
      expect(ran).toEqual([
        "a: files",
        "b: files",
        "b: output",
        "b: cell",
        "c: files",
        "a: output",
        "a: cell",
        "c: output",
        "c: cell"
      ])
      ran.length = 0
      yield* Releases.runAll(all)
      expect(ran).toEqual([])
    }))

  it.effect("many holders: one that throws or dies keeps none of the others from running, and the pass reports it", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const dies = Releases.unsafeMakeOwned()
      dies.add(() => void ran.push("after the death"))
      dies.add(() => Effect.dieMessage("an effect that dies"))
      const throws = Releases.unsafeMakeOwned()
      throws.add(() => {
        throw new Error("a release that throws")
      })
      const fine = Releases.unsafeMakeOwned()
      fine.add(() => Effect.sync(() => ran.push("the last holder")))
      const exit = yield* Effect.exit(Releases.runAll([dies, throws, fine]))
      expect(ran).toEqual(["after the death", "the last holder"])
      const defects = Exit.isFailure(exit) ? [...Cause.defects(exit.cause)].map((d) => String((d as Error).message)) : []
      expect(defects.sort()).toEqual(["a release that throws", "an effect that dies"])
    }))
})
