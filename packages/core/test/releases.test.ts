/**
 * A group's releases as one finalizer: the order a scope gives its
 * finalizers, synchronous ones without an effect, and one that throws or
 * dies keeping none of the others from running.
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
})
