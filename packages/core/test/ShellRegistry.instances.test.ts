/**
 * Two registries alive in one process must never share a tag: a stop finds
 * escaped members by their tag, so a shared one would make one registry's
 * kill take the other's shells for escapers.
 */
import { describe, expect, it } from "@effect/vitest"
import { ShellRegistry } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { registryLayer, taggedProcesses } from "./fixtures/registry/harness.js"

describe("two registries in one process", () => {
  it.live("have distinct tags and journals, and a kill in one leaves the other's shell running", () =>
    Effect.gen(function*() {
      const first = yield* Layer.build(registryLayer({ name: "first" }))
      const second = yield* Layer.build(registryLayer({ name: "second" }))
      const a = yield* Effect.provide(ShellRegistry, first)
      const b = yield* Effect.provide(ShellRegistry, second)
      const shellA = yield* a.start({ command: "sleep 30" }, { owner: "t" })
      const shellB = yield* b.start({ command: "sleep 30" }, { owner: "t" })
      expect(shellA.id).toBe("s1")
      expect(shellB.id).toBe("s1")
      expect(shellA.tag).toBe(`${process.pid}:s1`)
      expect(shellB.tag).toBe(`${process.pid}.2:s1`)
      const report = yield* a.kill(shellA.id, { owner: "t" })
      expect(report.escaped).toEqual([])
      expect(taggedProcesses(shellA.tag)).toEqual([])
      expect(taggedProcesses(shellB.tag).map((p) => p.pid)).toContain(shellB.pid)
      expect((yield* b.info(shellB.id)).status._tag).toBe("Running")
    }).pipe(Effect.scoped))
})
