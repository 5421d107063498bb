/**
 * `filter` and `waitFor` patterns come from outside (a model), so matching
 * them is bounded. They run in pattern workers under a time limit, and a
 * pattern that backtracks holds up nothing else. This process runs without
 * V8's linear-time fallback (`corral mcp` turns it on), so `(a+)+$` here runs
 * into the time limit.
 */
import { MAX_PATTERN_CHARS, ShellRegistry } from "@corral/core"
import type { InvalidPattern } from "@corral/core"
import { TIME_LIMIT_MS } from "../dist/internal/patternWorker.js"
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { nothingLeft, ownShellPrefix, registryLayer } from "./fixtures/registry/harness.js"

const owner = "pattern-test"

afterEach(() => Effect.runPromise(nothingLeft(ownShellPrefix, process.pid)))

/** A 30 KB line of `a` that ends in `b`: `(a+)+$` tries every way to split it. */
const longLine = { command: "head -c 30000 /dev/zero | tr '\\0' a; echo b; exec sleep 300" }

const started = Effect.gen(function*() {
  const registry = yield* ShellRegistry
  const shell = yield* registry.start(longLine, { owner })
  yield* registry.output(shell.id, { mode: "all", waitFor: "b$", waitMs: 10_000 })
  return shell
})

describe("patterns from outside", () => {
  it.live("a filter that backtracks fails after the time limit, while other calls are answered", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* started
      const began = Date.now()
      const slow = yield* Effect.fork(Effect.flip(registry.output(shell.id, { mode: "all", filter: "(a+)+$" })))
      // the serving thread is free: a read and a plain filter are answered meanwhile
      yield* Effect.sleep("100 millis")
      expect((yield* registry.output(shell.id, { mode: "all", filter: "aab$" })).text).toBe(`${"a".repeat(30_000)}b\n`)
      expect(yield* Fiber.poll(slow)).toSatisfy((exit) => exit._tag === "None")
      const error = yield* Fiber.join(slow)
      const tookMs = Date.now() - began
      expect(error).toMatchObject({ _tag: "InvalidPattern", pattern: "(a+)+$", option: "filter", problem: "cost" } satisfies Partial<InvalidPattern>)
      expect(error.message).toBe(
        `regular expression "(a+)+$" took more than 2s to match and was stopped: simplify it, avoiding nested repetition such as (a+)+ or (.*)*`
      )
      expect(tookMs).toBeGreaterThanOrEqual(TIME_LIMIT_MS - 50)
      expect(tookMs).toBeLessThan(TIME_LIMIT_MS + 5_000)
    }).pipe(Effect.provide(registryLayer())))

  it.live("a wait_for that backtracks fails the wait, rather than wait out its timeout", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      // no part of the line matches, whichever pieces it arrives in
      const shell = yield* registry.start({ command: "sleep 0.5; head -c 30000 /dev/zero | tr '\\0' a; echo c; exec sleep 300" }, { owner })
      const began = Date.now()
      const error = yield* Effect.flip(registry.output(shell.id, { waitFor: "(a+)+b$", waitMs: 60_000 }))
      expect(error).toMatchObject({ _tag: "InvalidPattern", option: "waitFor", problem: "cost" })
      expect(Date.now() - began).toBeLessThan(20_000)
    }).pipe(Effect.provide(registryLayer())))

  it.live("patterns the linear engine cannot run (backreferences, lookarounds) still match", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "printf 'aa\\nab\\nerror: x\\nno error\\n'; exec sleep 300" }, { owner })
      yield* registry.output(shell.id, { mode: "all", waitFor: "^no error$", waitMs: 10_000 })
      expect((yield* registry.output(shell.id, { mode: "all", filter: "^(\\w)\\1$" })).text).toBe("aa\n")
      expect((yield* registry.output(shell.id, { mode: "all", filter: "(?<!no )error" })).text).toBe("error: x\n")
    }).pipe(Effect.provide(registryLayer())))

  it.live("refuses a pattern over the length limit, before matching anything", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const shell = yield* registry.start({ command: "exec sleep 300" }, { owner })
      const pattern = "a".repeat(MAX_PATTERN_CHARS + 1)
      const error = yield* Effect.flip(registry.output(shell.id, { filter: pattern }))
      expect(error).toMatchObject({ _tag: "InvalidPattern", problem: "length", option: "filter" })
      expect(error.message).toBe(`regular expression "${"a".repeat(79)}…" is 1001 characters long, over the limit of 1000: use a shorter one`)
    }).pipe(Effect.provide(registryLayer())))
})
