/**
 * A foreground command: its own process group, output kept head and tail
 * as a screen shows it (see `ScreenText.makeScreen`), a time limit, and a
 * stop of whatever it leaves behind. The status comes from the leader's
 * exit, never from the pipes closing, so a grandchild that holds stdout
 * open cannot make the call hang.
 */
import { StringDecoder } from "node:string_decoder"
import type { StopReport } from "@corral/core/GroupStop"
import type { OutputBuffer, OutputChunk } from "@corral/core/OutputBuffer"
import * as ProcessGroup from "@corral/core/ProcessGroup"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { makeScreen } from "../ScreenText.js"
import type { Capped } from "./cap.js"
import { makeKeeper } from "./cap.js"

export interface Finished {
  readonly output: Capped
  /** None when the leader outlived even SIGKILL (uninterruptible sleep). */
  readonly exit: Option.Option<ProcessGroup.ExitStatus>
  readonly timedOut: boolean
  /** Until the leader exited, or the time limit. */
  readonly durationMs: number
  /** The stop after the leader exited or timed out; `members` counts what was left running. */
  readonly stop: StopReport
}

export const CUT_HINT = "to see all of it, redirect the output to a file (cmd > out.log 2>&1) and read it with grep, head or tail"

/** Keeps the output from its first byte, every chunk however fast it comes (OutputBuffer.subscribeFrom). */
const keepOutput = (output: OutputBuffer, tty: boolean) =>
  Effect.gen(function*() {
    const keeper = makeKeeper()
    const decoder = new StringDecoder("utf8")
    const screen = makeScreen(tty)
    const take = (chunk: OutputChunk) => keeper.push(screen.push(decoder.write(chunk.bytes)))
    const { live, retained } = yield* output.subscribeFrom(0)
    retained.forEach(take)
    const follower = yield* Effect.forkScoped(Stream.runForEach(live, (chunk) => Effect.sync(() => take(chunk))))
    return Fiber.join(follower).pipe(
      Effect.map(() => {
        keeper.push(screen.push(decoder.end()) + screen.end())
        return keeper.result(CUT_HINT)
      })
    )
  })

/** `guard` keeps the group known to the supervisor's watcher while it runs. */
export const run = (
  spec: ProcessGroup.SpawnSpec,
  timeout: Duration.Duration,
  guard: (group: ProcessGroup.ProcessGroup) => Effect.Effect<void, never, Scope.Scope>
) =>
  Effect.scoped(Effect.gen(function*() {
    // the monotonic clock: a wall clock stepped meanwhile does not change how long the command ran
    const began = yield* Clock.currentTimeNanos
    const group = yield* ProcessGroup.spawn(spec)
    yield* guard(group)
    const output = yield* keepOutput(group.output, group.tty)
    const exited = yield* Effect.timeoutOption(group.awaitExit, timeout)
    const durationMs = Math.round(Duration.toMillis(Duration.nanos((yield* Clock.currentTimeNanos) - began)))
    // after a timeout this stops the command itself; after an exit, what it left behind
    const stop = yield* group.stop()
    return {
      output: yield* output,
      // the stop counts a zombie leader as gone before Node has reaped it
      exit: Option.isSome(exited) ? exited : yield* Effect.timeoutOption(group.awaitExit, Duration.seconds(1)),
      timedOut: Option.isNone(exited),
      durationMs,
      stop
    } satisfies Finished
  }))
