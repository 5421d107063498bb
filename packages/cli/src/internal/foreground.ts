/**
 * `corral run --foreground`, as `timeout --foreground`: CMD stays in
 * corral's process group and session, so at a shell prompt it is part of
 * the terminal's foreground job. It reads the TTY, and Ctrl-C, Ctrl-Z and
 * window changes reach it from the terminal itself. Only CMD is signalled,
 * on timeout or when corral passes a signal on; what CMD started is neither
 * waited for nor stopped. corral's guarantee stands on a group (and a cell)
 * of CMD's own, which a foreground CMD does not have: it is given up, as
 * GNU gives it up.
 */
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { constants } from "node:os"
import type { ExitStatus } from "@corral/core/ProcessGroup"
import { SpawnError } from "@corral/core/ProcessGroup"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as ExitCode from "./exitCode.js"
import { printError } from "./print.js"
import type { RunArgs } from "./runArgs.js"
import * as Signals from "./signals.js"

/**
 * What corral passes on to CMD: the terminal sends its own signals to the
 * whole foreground job, so SIGWINCH and job control are left to it; the
 * rest reach CMD from corral too, as timeout(1) sends them.
 */
const passedOn = Signals.forwarded.filter((s) => s !== "SIGWINCH")

const say = (args: RunArgs, message: string) => (args.verbose ? Effect.sync(() => printError(message)) : Effect.void)

/** `file args` with `signals` ignored: Node's spawn resets them, a one-line sh sets them again and execs (as ProcessGroup does). */
const ignoring = (signals: ReadonlyArray<number>, file: string, args: ReadonlyArray<string>): readonly [string, ReadonlyArray<string>] =>
  signals.length === 0 ? [file, args] : ["/bin/sh", ["-c", `trap '' ${signals.join(" ")}; exec "$@"`, "sh", file, ...args]]

const start = (args: RunArgs, ignored: ReadonlyArray<number>) =>
  Effect.async<ChildProcess, SpawnError>((resume) => {
    const [file, rest] = ignoring(ignored, args.command[0]!, args.command.slice(1))
    let child: ChildProcess
    try {
      child = spawn(file, rest, { stdio: "inherit" })
    } catch (cause) {
      return resume(Effect.fail(new SpawnError({ file: args.command[0]!, code: (cause as NodeJS.ErrnoException).code ?? "UNKNOWN", cause })))
    }
    child.once("error", (cause: NodeJS.ErrnoException) =>
      resume(Effect.fail(new SpawnError({ file: args.command[0]!, code: cause.code ?? "UNKNOWN", cause }))))
    child.once("spawn", () => resume(Effect.succeed(child)))
  })

const exitOf = (child: ChildProcess) =>
  Effect.async<ExitStatus>((resume) => {
    const done = (code: number | null, signal: NodeJS.Signals | null) =>
      resume(Effect.succeed(signal !== null ? { _tag: "Signaled", signal } : { _tag: "Exited", code: code ?? 0 }))
    if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode, child.signalCode)
    child.once("exit", done)
  })

/**
 * Runs CMD in the foreground until it exits; `timeout` and `grace` as for
 * a group, but every signal goes to CMD's pid alone. How corral ends.
 */
export const supervise = Effect.fn("Foreground.supervise")(function*(
  args: RunArgs,
  ignored: ReadonlySet<number>,
  forCommand: ReadonlyArray<number>,
  grace: Duration.Duration,
  sleep: (d: Duration.Duration) => Effect.Effect<void>
) {
  const received = yield* Signals.queue(passedOn)
  const child = yield* Effect.acquireRelease(start(args, forCommand), (child) =>
    // corral is going: a CMD still running (an internal failure) is not left behind
    Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL")))
  const exited = yield* Deferred.make<ExitStatus>()
  yield* Effect.forkScoped(Effect.flatMap(exitOf(child), (status) => Deferred.succeed(exited, status)))
  const send = (signal: NodeJS.Signals | number) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill(signal))
  let armed = false
  const killAfterGrace = Effect.suspend(() => {
    if (armed) return Effect.void
    armed = true
    const kill = Effect.zipRight(say(args, `CMD (pid ${child.pid}) still runs: sending SIGKILL`), send("SIGKILL"))
    return Effect.asVoid(Effect.forkScoped(Effect.zipRight(sleep(grace), kill)))
  })
  const timedOut = yield* Deferred.make<string>()
  yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(received), (signal) => {
    if (signal === "SIGALRM") return Deferred.succeed(timedOut, "received SIGALRM")
    if (ignored.has(constants.signals[signal]) && constants.signals[signal] !== args.signal) return Effect.void
    return say(args, `received ${signal}: passing it on to CMD (pid ${child.pid})`).pipe(
      Effect.zipRight(send(signal)),
      Effect.zipRight(Option.isSome(args.grace) ? killAfterGrace : Effect.void)
    )
  })))
  yield* Effect.forkScoped(Option.match(args.timeout, {
    onNone: () => Effect.never,
    onSome: (after) => Effect.flatMap(sleep(after), () => Deferred.succeed(timedOut, "timed out"))
  }))
  const outcome = yield* Effect.raceFirst(
    Effect.map(Deferred.await(exited), (status) => ({ _tag: "Exited", status }) as const),
    Effect.map(Deferred.await(timedOut), (why) => ({ _tag: "TimedOut", why }) as const)
  )
  if (outcome._tag === "Exited") return ExitCode.endingOf(outcome.status)
  yield* say(args, `${outcome.why}: sending SIG${Signals.nameOf(args.signal)} to CMD (pid ${child.pid}) alone`)
  yield* send(Signals.toNode(args.signal))
  yield* killAfterGrace
  return ExitCode.exit(ExitCode.afterTimeout(yield* Deferred.await(exited), args.preserveStatus))
}, Effect.scoped)
