import { Containment } from "@corral/core/Containment"
import { Limits } from "@corral/core/Limits"
import { ProcessTable } from "@corral/core/ProcessTable"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import type { ShellStatus } from "@corral/core/ShellRegistry"
import * as AcpShellRows from "@corral/tools/AcpShellRows"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { call, inPidNamespace, leftovers, okText, toolsLayer } from "./helpers.js"

describe("AcpShellRows.statusOf", () => {
  const cases: ReadonlyArray<readonly [ShellStatus, AcpShellRows.ToolCallStatus]> = [
    [{ _tag: "Running" }, "in_progress"],
    [{ _tag: "Lingering", exit: { _tag: "Exited", code: 0 }, members: 1 }, "in_progress"],
    [{ _tag: "Stopping", by: "request" }, "in_progress"],
    [{ _tag: "Exited", code: 0 }, "completed"],
    [{ _tag: "Exited", code: 1 }, "failed"],
    [{ _tag: "Killed", signal: "SIGTERM", by: "request" }, "completed"],
    [{ _tag: "Killed", signal: "SIGKILL", by: "shutdown" }, "completed"],
    [{ _tag: "Killed", signal: "SIGTERM", by: "lifetime" }, "failed"],
    [{ _tag: "Killed", signal: "SIGKILL" }, "failed"],
  ]
  for (const [status, expected] of cases) {
    it(`${JSON.stringify(status)} is ${expected}`, () => expect(AcpShellRows.statusOf(status)).toBe(expected))
  }
})

const registryLayer = ShellRegistry.layer({ name: "acp test", crashSafety: false }).pipe(
  Layer.provide(Containment.layer().pipe(Layer.provideMerge(Layer.merge(Limits.layerWith({ grace: Duration.millis(300) }), ProcessTable.layer))))
)

const isFinal = (u: AcpShellRows.SessionUpdate) => u.sessionUpdate === "tool_call_update" && u.status !== undefined

const textOf = (u: AcpShellRows.SessionUpdate | undefined) => u?.content?.map((c) => c.content.text).join("") ?? ""

/** Collects one shell's row, from its creation to its final status, while `act` drives the shell. */
const rowOf = <E>(command: string, act: (id: string) => Effect.Effect<unknown, E, ShellRegistry>) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const collecting = yield* AcpShellRows.stream({ interval: Duration.millis(20) }).pipe(
      Stream.takeUntil(isFinal),
      Stream.runCollect,
      Effect.fork
    )
    const info = yield* registry.start({ command }, { owner: "acp" })
    yield* act(info.id)
    return Chunk.toReadonlyArray(yield* Fiber.join(collecting))
  }).pipe(Effect.provide(registryLayer), Effect.tap(() => expect(leftovers()).toEqual([])))

describe.skipIf(!inPidNamespace)("AcpShellRows.stream over real shells (kills orphan processes: needs the PID namespace of npm test)", () => {
  it.live("one row: in_progress, the output as it comes, flushed before completed", () =>
    Effect.gen(function*() {
      const command = "sleep 0.2; echo one; sleep 0.2; echo two"
      const updates = yield* rowOf(command, () => Effect.void)
      const [first, ...rest] = updates
      expect(first).toEqual({
        sessionUpdate: "tool_call",
        toolCallId: "shell:s1",
        title: command,
        kind: "execute",
        status: "in_progress",
        content: [],
        rawInput: { command, cwd: process.cwd() }
      })
      const final = rest[rest.length - 1]!
      const live = rest.slice(0, -1)
      expect(live.length).toBeGreaterThanOrEqual(1)
      expect(live.every((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "shell:s1" && u.status === undefined)).toBe(true)
      expect(textOf(live[live.length - 1])).toBe("one\ntwo\n")
      expect(final).toEqual({
        sessionUpdate: "tool_call_update",
        toolCallId: "shell:s1",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: "one\ntwo\n[exited with code 0]" } }],
        rawOutput: { status: "exited with code 0", exitCode: 0 }
      })
    }))

  it.live("a progress bar drawn across many updates shows as its last redraw in every update of the row", () =>
    Effect.gen(function*() {
      // each step a read of its own: the redraws replace those of earlier reads too
      const command = "for i in 1 2 3 4 5 6 7 8; do printf '\\rstep %d/8' $i; sleep 0.03; done; echo; echo done"
      const updates = yield* rowOf(command, () => Effect.void)
      const live = updates.slice(1, -1).map(textOf)
      expect(live.length).toBeGreaterThanOrEqual(2)
      // `echo; echo done` writes twice: a read may land between the line's end and "done"
      for (const text of live) expect(text).toMatch(/^step [1-8]\/8(\n(done\n)?)?$/)
      expect(textOf(updates[updates.length - 1])).toBe("step 8/8\ndone\n[exited with code 0]")
    }))

  it.live("a non-zero exit fails the row", () =>
    Effect.gen(function*() {
      const updates = yield* rowOf("sleep 0.2; echo broken >&2; exit 3", () => Effect.void)
      expect(updates[updates.length - 1]).toMatchObject({
        status: "failed",
        content: [{ content: { text: "broken\n[exited with code 3]" } }],
        rawOutput: { exitCode: 3 }
      })
    }))

  it.live("a stop on request completes the row, saying how it was stopped", () =>
    Effect.gen(function*() {
      const updates = yield* rowOf("echo serving; sleep 30", (id) =>
        Effect.gen(function*() {
          const registry = yield* ShellRegistry
          yield* registry.output(id, { waitFor: "serving", reader: "test" })
          yield* registry.kill(id, { owner: "acp" })
        }))
      expect(updates[updates.length - 1]).toMatchObject({
        status: "completed",
        content: [{ content: { text: "serving\n[killed by SIGTERM (stopped on request)]" } }],
        rawOutput: { signal: "SIGTERM" }
      })
    }))

  it.live("AcpShellRows.layer provided with the registry's layer: the app's release sends each running shell's shutdown row, then nothing more", () =>
    Effect.gen(function*() {
      const sent: Array<AcpShellRows.SessionUpdate> = []
      const app = AcpShellRows.layer((update) => Effect.sync(() => sent.push(update)), { interval: Duration.millis(20) }).pipe(
        Layer.provideMerge(registryLayer)
      )
      // a plain program under the composed layer: nothing in it knows of the rows
      yield* Effect.gen(function*() {
        const registry = yield* ShellRegistry
        for (const command of ["echo serving; sleep 30", "trap '' TERM; echo stubborn; sleep 30"]) {
          const { id } = yield* registry.start({ command }, { owner: "acp" })
          yield* registry.output(id, { waitFor: "serving|stubborn", reader: "test" })
        }
      }).pipe(Effect.provide(app))
      expect(leftovers()).toEqual([])
      const finals = sent.filter(isFinal)
      expect(finals.map((u) => [u.toolCallId, u.status, textOf(u)]).sort()).toEqual([
        ["shell:s1", "completed", "serving\n[killed by SIGTERM (stopped at shutdown)]"],
        ["shell:s2", "completed", "stubborn\n[killed by SIGKILL (stopped at shutdown)]"]
      ])
      // each row: created, then its output, then its end, and nothing after it
      for (const id of ["shell:s1", "shell:s2"]) {
        const row = sent.filter((u) => u.toolCallId === id)
        expect(row[0]!.sessionUpdate).toBe("tool_call")
        expect(row.findIndex(isFinal)).toBe(row.length - 1)
      }
      const count = sent.length
      yield* Effect.sleep(Duration.millis(100))
      expect(sent.length).toBe(count)
    }))

  it.live("AcpShellRows.layer beside the agent's tools: a background bash the host's exit stops ends its row as completed", () =>
    Effect.gen(function*() {
      const sent: Array<AcpShellRows.SessionUpdate> = []
      const app = AcpShellRows.layer((update) => Effect.sync(() => sent.push(update))).pipe(Layer.provideMerge(toolsLayer()))
      const started = yield* Effect.gen(function*() {
        const started = yield* call("bash", { command: "echo dev server up; sleep 30", run_in_background: true })
        yield* call("bash_output", { shell_id: "s1", wait_for: "up" })
        return started
      }).pipe(Effect.provide(app))
      expect(okText(started)).toMatch(/^Started background shell s1 /)
      expect(leftovers()).toEqual([])
      expect(sent.filter(isFinal)).toEqual([{
        sessionUpdate: "tool_call_update",
        toolCallId: "shell:s1",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: "dev server up\n[killed by SIGTERM (stopped at shutdown)]" } }],
        rawOutput: { status: "killed by SIGTERM (stopped at shutdown)", signal: "SIGTERM" }
      }])
    }))

  it.live("the stream ends after the shutdown's rows; started after the shutdown, it is empty", () =>
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const collecting = yield* AcpShellRows.stream({ interval: Duration.millis(20) }).pipe(Stream.runCollect, Effect.fork)
      const { id } = yield* registry.start({ command: "echo up; sleep 30" }, { owner: "acp" })
      yield* registry.output(id, { waitFor: "up", reader: "test" })
      yield* registry.shutdown
      const rows = Chunk.toReadonlyArray(yield* Fiber.join(collecting))
      expect(rows[rows.length - 1]).toMatchObject({ toolCallId: "shell:s1", status: "completed", rawOutput: { signal: "SIGTERM" } })
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(AcpShellRows.stream()))).toEqual([])
    }).pipe(Effect.provide(registryLayer), Effect.tap(() => expect(leftovers()).toEqual([]))))
})
