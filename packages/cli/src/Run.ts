/**
 * `corral run`: timeout(1) for process groups. CMD runs in a session and
 * group of its own with corral's stdin, stdout and stderr, and when it ends,
 * however it ends, nothing it started is left running.
 */
import type { ContainmentUnavailable } from "@corral/core/Containment"
import { Containment } from "@corral/core/Containment"
import * as DurationInput from "@corral/core/DurationInput"
import { Limits } from "@corral/core/Limits"
import * as ProcessGroup from "@corral/core/ProcessGroup"
import { ProcessTable } from "@corral/core/ProcessTable"
import * as Watcher from "@corral/core/Watcher"
import * as Cause from "effect/Cause"
import type * as ConfigError from "effect/ConfigError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ExitCode from "./internal/exitCode.js"
import type { RunArgs } from "./internal/runArgs.js"
import * as RunArgsParser from "./internal/runArgs.js"
import * as Signals from "./internal/signals.js"
import * as StderrLogger from "./internal/stderrLogger.js"
import { printError, writeOut } from "./internal/stdio.js"
import * as StopReport from "./internal/stopReport.js"
import type { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral run [--timeout D] [--grace D] [--containment C] [--verbose] [--] CMD [ARGS...]

Runs CMD (no shell) in a process group and session of its own, passing stdin,
stdout and stderr through untouched. When CMD exits, times out or corral is
signalled, corral stops whatever is left of CMD's group (SIGTERM, the grace
period, then SIGKILL) before it returns: like timeout(1), but nothing CMD
started outlives it. Options end at the first word that is not one, or at --.
CMD's new session has no controlling terminal: a program that opens /dev/tty
(a password prompt, for one) cannot.

options:
  --timeout D    stop CMD's group after D and exit 124; 0 means no limit (the default)
  --grace D      how long a stop waits after SIGTERM before SIGKILL
                 (default 3s, or the CORRAL_GRACE environment variable)
  --containment C
                 how CMD's processes are held: cgroup (a cgroup v2 of its own, which
                 nothing can leave; needs root or a delegated subtree), pidns (a PID
                 namespace of its own, which nothing can leave; needs unshare, perl
                 and user namespaces), procScan (its group, session, CORRAL_SHELL_ID
                 and descendants, found in the process table), or auto (default, or
                 CORRAL_CONTAINMENT): the first of those that works
  -v, --verbose  print how CMD's group was stopped on stderr
  -h, --help     print this help

Durations are 500ms, 3s, 2m, 1h or bare seconds (1.5).

signals:
  SIGINT and SIGHUP are passed on to CMD's group, as timeout(1) does, and the
  group gets the grace period to exit; SIGTERM starts the stop at once. Either
  way corral then stops what is left and exits with CMD's status, which is
  128+N when CMD died of the signal N. Further signals are ignored while the
  stop runs; it is bounded by the grace period plus one second of SIGKILL.

exit status (as timeout(1)):
  CMD's own   CMD exited with it
  124         CMD timed out
  125         corral failed: bad usage, bad duration or configuration
  126         CMD was found but cannot be run
  127         CMD was not found
  128+N       CMD died of signal N
`

type Outcome =
  | { readonly _tag: "Exited"; readonly status: ProcessGroup.ExitStatus }
  | { readonly _tag: "TimedOut"; readonly after: Duration.Duration }
  | { readonly _tag: "Signalled"; readonly signal: Signals.TerminationSignal }

const say = (message: string) => Effect.sync(() => printError(message))

const stopAndReport = (group: ProcessGroup.ProcessGroup, args: RunArgs) =>
  Effect.flatMap(group.stop(), (report) => (args.verbose ? say(StopReport.format(report)) : Effect.void))

/**
 * Passes a signal on to CMD's group and gives it the grace period to act on
 * it. SIGTERM needs no passing on: the stop that follows starts with it.
 */
const passOn = (group: ProcessGroup.ProcessGroup, signal: Signals.TerminationSignal) =>
  Effect.gen(function*() {
    // an unreaped leader keeps its group id reserved, so the signal cannot hit a stranger
    if (signal === "SIGTERM" || Option.isSome(yield* group.exitStatus)) return
    const table = yield* ProcessTable
    const { grace } = yield* Limits
    yield* table.signal(-group.pid, signal)
    yield* Effect.timeoutOption(group.awaitExit, grace)
  })

/** As timeout(1): the signal goes to CMD, and CMD's status, however it ended, is corral's. */
const onSignal = (group: ProcessGroup.ProcessGroup, signal: Signals.TerminationSignal, args: RunArgs) =>
  Effect.gen(function*() {
    if (args.verbose) {
      yield* say(`received ${signal}: ${signal === "SIGTERM" ? "stopping" : "passing it on to"} group ${group.pid}`)
    }
    yield* passOn(group, signal)
    yield* stopAndReport(group, args)
    // the stop counts a zombie leader as gone before Node has reaped it
    const status = yield* Effect.timeoutOption(group.awaitExit, "1 second")
    return Option.match(status, { onNone: () => ExitCode.ofSignal(signal), onSome: ExitCode.ofStatus })
  })

const onTimeout = (group: ProcessGroup.ProcessGroup, after: Duration.Duration, args: RunArgs) =>
  Effect.gen(function*() {
    if (args.verbose) yield* say(`timed out after ${DurationInput.format(after)}: stopping group ${group.pid}`)
    yield* stopAndReport(group, args)
    return ExitCode.TimedOut
  })

const settle = (group: ProcessGroup.ProcessGroup, outcome: Outcome, args: RunArgs): Effect.Effect<number, never, ProcessTable | Limits> => {
  switch (outcome._tag) {
    case "Exited":
      return Effect.as(stopAndReport(group, args), ExitCode.ofStatus(outcome.status))
    case "TimedOut":
      return onTimeout(group, outcome.after, args)
    case "Signalled":
      return onSignal(group, outcome.signal, args)
  }
}

const supervise = Effect.fn("Run.supervise")(function*(args: RunArgs) {
  const signalled = yield* Signals.listen(Signals.terminationSignals)
  // the watcher stops CMD's group if corral itself is SIGKILLed
  const watcher = yield* Watcher.make
  yield* (yield* Containment).reapLeftovers
  const group = yield* ProcessGroup.spawn({ command: args.command, stdio: "inherit" }).pipe(
    Effect.provideService(Watcher.Watcher, watcher)
  )
  const outcome = yield* Effect.raceAll<Effect.Effect<Outcome>>([
    Effect.map(group.awaitExit, (status) => ({ _tag: "Exited", status })),
    Option.match(args.timeout, {
      onNone: () => Effect.never,
      onSome: (after) => Effect.as(Effect.sleep(after), { _tag: "TimedOut", after })
    }),
    Effect.map(signalled, (signal) => ({ _tag: "Signalled", signal }))
  ])
  return yield* settle(group, outcome, args)
}, Effect.scoped)

const layer = (args: RunArgs) =>
  Containment.layer(Option.getOrUndefined(args.containment)).pipe(Layer.provideMerge(Layer.merge(
    ProcessTable.layer,
    Limits.layerConfig(Option.match(args.grace, { onNone: () => ({}), onSome: (grace) => ({ grace }) }))
  )))

type RunError = UsageError | ConfigError.ConfigError | ContainmentUnavailable | ProcessGroup.ProcessGroupError

const exitCodeOf = (error: RunError): number => {
  if (error._tag !== "SpawnError") return ExitCode.Failed
  return error.code === "ENOENT" ? ExitCode.NotFound : ExitCode.CannotInvoke
}

const messageOf = (error: RunError): string =>
  error._tag === "ConfigError" ? `bad configuration: ${error}` : error.message

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const parsed = yield* RunArgsParser.parse(argv)
    if (parsed._tag === "Help") return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    return yield* Effect.provide(supervise(parsed.args), layer(parsed.args))
  }).pipe(
    Effect.catchAll((error: RunError) => Effect.as(say(messageOf(error)), exitCodeOf(error))),
    // CMD owns stdout: corral's own warnings go to stderr
    Effect.provide(StderrLogger.layer)
  )

/** Runs `corral run` with the words after `run`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => {
  void Effect.runPromiseExit(program(argv)).then((exit) => {
    if (Exit.isFailure(exit)) printError(`internal error: ${Cause.pretty(exit.cause)}`)
    process.exitCode = Exit.isSuccess(exit) ? exit.value : ExitCode.Failed
  })
}
