/**
 * A deadline that came due while the process was busy, as on a loaded host,
 * against an event that was already waiting: a real child's exit.
 */
import { spawn } from "node:child_process"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { afterIoDue } from "../dist/internal/macrotask.js"

describe("afterIoDue", () => {
  it.live("a deadline due while the process was busy comes after an exit that was waiting by then; a plain timer comes before it", () =>
    Effect.gen(function*() {
      const child = spawn("sleep", ["30"], { stdio: "ignore" })
      const order: Array<string> = []
      setTimeout(() => order.push("plain timer"), 20)
      const deadline = new Promise<void>((resolve) =>
        afterIoDue(20, () => {
          order.push("deadline")
          resolve()
        }))
      child.once("exit", () => order.push("exit"))
      child.kill("SIGKILL")
      // busy past both timers: the exit is known to the kernel, not yet read by this process
      const until = performance.now() + 200
      while (performance.now() < until) {}
      yield* Effect.promise(() => deadline)
      expect(order).toEqual(["plain timer", "exit", "deadline"])
    }))

  it.live("a cancelled deadline never calls back, before or after it came due", () =>
    Effect.gen(function*() {
      const called: Array<string> = []
      afterIoDue(5, () => called.push("before"))()
      const cancelLater = afterIoDue(5, () => called.push("after"))
      // due in the same turn, after it: its timer has fired, its immediate is not yet run
      setTimeout(cancelLater, 5)
      const until = performance.now() + 20
      while (performance.now() < until) {}
      yield* Effect.sleep("30 millis")
      expect(called).toEqual([])
    }))
})
