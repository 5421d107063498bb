import { OutputBuffer } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ShellInfo } from "@corral/core"
// the built module: its pattern worker runs from dist
import * as ShellOutput from "../dist/internal/shellOutput.js"

const bytes = (text: string) => new TextEncoder().encode(text)

/**
 * A shell that has ended, whose last line arrives `lateMs` later and whose
 * output then ends: as a PID namespace's init reports its command's exit
 * before the terminal or pipes close.
 */
const endedBeforeItsOutput = (lateMs: number) =>
  Effect.gen(function*() {
    const output = yield* OutputBuffer.make(1024)
    output.append("stdout", bytes("ready\n"))
    setTimeout(() => {
      output.append("stdout", bytes("handled HUP\n"))
      output.unsafeEnd()
    }, lateMs)
    const source: ShellOutput.Source = {
      output,
      cursors: new Map([["default", 6]]),
      info: Effect.succeed({} as ShellInfo),
      settled: Effect.void,
      hasSettled: Effect.succeed(true)
    }
    return source
  })

describe("a read of a shell that has ended", () => {
  it.live("waits a moment for what the dead wrote: a wait_for still finds a line that comes after the end is known", () =>
    Effect.gen(function*() {
      const source = yield* endedBeforeItsOutput(50)
      const result = yield* ShellOutput.read(source, { waitFor: "^handled", waitMs: 5_000 })
      expect(result.waited).toBe("matched")
      expect(result.text).toBe("handled HUP\n")
    }))

  it.live("and a plain read gets it too", () =>
    Effect.gen(function*() {
      const source = yield* endedBeforeItsOutput(50)
      expect((yield* ShellOutput.read(source, {})).text).toBe("handled HUP\n")
    }))

  it.live("but not for long: output a process that outlived the shell keeps open is read as it is after 200 ms", () =>
    Effect.gen(function*() {
      const source = yield* endedBeforeItsOutput(60_000)
      const started = Date.now()
      const result = yield* ShellOutput.read(source, { waitFor: "^handled", waitMs: 5_000 })
      expect(result.waited).toBe("exited")
      expect(result.text).toBe("")
      expect(Date.now() - started).toBeLessThan(2_000)
    }))
})
