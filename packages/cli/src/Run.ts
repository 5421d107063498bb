/**
 * `corral run`: GNU timeout(1) for process groups. CMD runs in a session and
 * group of its own with corral's stdin, stdout and stderr, and when it ends,
 * however it ends, nothing it started is left running.
 */
import { constants } from "node:os"
import type { ContainmentUnavailable } from "@corral/core/Containment"
import { Containment } from "@corral/core/Containment"
import * as DurationInput from "@corral/core/DurationInput"
import type { StopOptions } from "@corral/core/GroupStop"
import { Limits } from "@corral/core/Limits"
import * as ProcessGroup from "@corral/core/ProcessGroup"
import { ProcessTable } from "@corral/core/ProcessTable"
import * as Watcher from "@corral/core/Watcher"
import type * as ConfigError from "effect/ConfigError"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as ExitCode from "./internal/exitCode.js"
import * as Foreground from "./internal/foreground.js"
import type { RunArgs } from "./internal/runArgs.js"
import * as RunArgsParser from "./internal/runArgs.js"
import * as Signals from "./internal/signals.js"
import * as StderrLogger from "./internal/stderrLogger.js"
import { printError, printFailure, writeOut } from "./internal/stdio.js"
import * as StopReport from "./internal/stopReport.js"
import type { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral run [OPTION]... [DURATION] CMD [ARG]...

GNU timeout(1) for a whole process group. Runs CMD (no shell) in a process
group and session of its own, passing stdin, stdout and stderr through
untouched, and stops it if it is still running after DURATION. When CMD
exits, times out or is killed, corral stops whatever is left of its group
(the signal, the grace period, then SIGKILL) before it returns: nothing CMD
started outlives it. Options end at the first word that is not one, or at --.
CMD's new session has no controlling terminal: a program that opens /dev/tty
(a password prompt, for one) cannot, unless run with --foreground.

options (as timeout(1), plus corral's own):
  -s, --signal=SIG   the signal sent on timeout (default TERM): a name, with or
                     without SIG (INT, SIGHUP, RTMIN+1), or a number (2, 0)
  -k, --kill-after=D how long to wait after the signal before SIGKILL; also after
                     a signal passed on to CMD (see below). -k 0 is as no -k
      --grace=D      the same, except that 0 means SIGKILL at once. Without
                     either: 3s, or the CORRAL_GRACE environment variable
  -p, --preserve-status
                     exit with CMD's status even when it times out
      --foreground   as timeout(1)'s: CMD stays in corral's group, so at a shell
                     prompt it can read the terminal and gets its signals. Only
                     CMD is signalled, on timeout and when a signal is passed on;
                     what it started is neither waited for nor stopped: no group,
                     containment or watcher holds it (the guarantee is given up)
      --timeout=D    the time limit, as DURATION; 0 means none (the default)
      --containment=C
                     how CMD's processes are held: cgroup (a cgroup v2 of its own, which
                     nothing can leave; needs root or a delegated subtree), pidns (a PID
                     namespace of its own, which nothing can leave; needs unshare, perl
                     and user namespaces), procScan (its group, session, CORRAL_SHELL_ID
                     and descendants, found in the process table), or auto (default, or
                     CORRAL_CONTAINMENT): the first of those that works
  -v, --verbose      say on stderr what was signalled, and how CMD's group was stopped
  -h, --help         print this help

DURATION is a floating-point number (1.5, .1, 1e3, 0x1p-3) with an optional
unit: s (the default), m, h or d, as timeout(1) takes it, or ms. 0 disables the
limit; a value too large for any clock is no limit. Unless --timeout is given,
a first word that reads as a duration is DURATION: \`corral run 10 make\` is
\`timeout 10 make\`, and \`corral run make\` has no limit.

signals:
  SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to corral
  are passed on to CMD's group (and SIGCONT after all but SIGWINCH), and corral
  waits for CMD, as timeout(1) does; with -k or --grace, it kills the group that
  long after the first. SIGALRM times CMD out at once. SIGTSTP (Ctrl-Z) stops
  CMD's group and corral as one job; SIGCONT (fg, bg) resumes both. Signals
  ignored when corral started stay ignored, for CMD too (but SIGALRM and -s's).

exit status (as timeout(1)):
  CMD's own   CMD's exit code; if CMD died of signal N, corral dies of N too
              (a shell sees 128+N), or exits 128+N where that would dump core
  124         CMD timed out (and --preserve-status was not given)
  125         corral failed: bad usage, bad duration or signal, configuration
  126         CMD was found but cannot be run
  127         CMD was not found
  137         CMD timed out and needed SIGKILL (128+9), even with --preserve-status

differences from timeout(1), on purpose:
  - every stop is of CMD's whole group, and waits until the group is gone;
    leftovers are stopped when CMD exits too;
  - after the signal, SIGKILL follows the grace period (3s) even without -k;
    timeout(1) sends none unless given -k;
  - a CMD of its own session does not get the terminal's signals: corral passes
    on the ones above (with --foreground CMD shares corral's terminal instead).
`

type Outcome =
  | { readonly _tag: "Exited"; readonly status: ProcessGroup.ExitStatus }
  | { readonly _tag: "TimedOut"; readonly why: string }

const say = (message: string) => Effect.sync(() => printError(message))

/** The first signal of the group's one stop, for its report: a later call shares the stop begun first. */
interface StopLog {
  first: string | undefined
}

const stopAndReport = (group: ProcessGroup.ProcessGroup, args: RunArgs, log: StopLog, options: StopOptions = {}) =>
  Effect.suspend(() => {
    log.first ??= options.signal === undefined ? "SIGTERM" : Signals.fullName(options.signal)
    return Effect.flatMap(group.stop(options), (report) => (args.verbose ? say(StopReport.format(report, log.first)) : Effect.void))
  })

/** Node's timers, and so effect's clock, never wake from a sleep past 2^31-1 ms: longer ones sleep in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

const sleepFor = (duration: Duration.Duration): Effect.Effect<void> => {
  const ms = Duration.toMillis(duration)
  return ms <= MAX_TIMER_MS || !Duration.isFinite(duration)
    ? Effect.sleep(duration)
    : Effect.zipRight(Effect.sleep(MAX_TIMER_MS), Effect.suspend(() => sleepFor(Duration.millis(ms - MAX_TIMER_MS))))
}

/**
 * Ctrl-Z: CMD's group is stopped, then corral, as one job. With SIGSTOP:
 * CMD's group is orphaned (its session is its own), and the kernel drops a
 * SIGTSTP to an orphaned group rather than stop it.
 */
const suspend = (group: ProcessGroup.ProcessGroup, args: RunArgs, running: boolean) =>
  Effect.gen(function*() {
    if (args.verbose) yield* say(`received SIGTSTP: suspending ${running ? `group ${group.pid} and ` : ""}corral`)
    if (running) yield* group.signal("SIGSTOP")
    Signals.suspendSelf()
  })

/**
 * What corral does with a signal it receives, as timeout(1): SIGALRM times
 * CMD out; one its caller ignored stays ignored; any other goes to CMD's
 * group, then SIGCONT, so a stopped CMD can act on it. CMD decides what it
 * means; with a grace given on the command line (as `timeout -k`), the group
 * is killed that long after the first one, if CMD is still running. SIGTSTP
 * and SIGCONT suspend and resume CMD with corral, as one job.
 */
const makeForward = (
  group: ProcessGroup.ProcessGroup,
  args: RunArgs,
  ignored: ReadonlySet<number>,
  alarm: Deferred.Deferred<string>,
  log: StopLog
) => {
  let armed = false
  const escalate = (signal: NodeJS.Signals) =>
    Option.match(args.grace, {
      onNone: () => Effect.void,
      onSome: (grace) => {
        if (armed) return Effect.void
        armed = true
        const kill = Effect.zipRight(
          args.verbose ? say(`${DurationInput.format(grace)} after ${signal}, CMD still runs: killing group ${group.pid}`) : Effect.void,
          stopAndReport(group, { ...args, verbose: false }, log, { signal: "SIGKILL", grace: 0 })
        )
        return Effect.asVoid(Effect.fork(Effect.zipRight(sleepFor(grace), kill)))
      }
    })
  return (signal: NodeJS.Signals) =>
    Effect.gen(function*() {
      if (signal === "SIGALRM") return yield* Deferred.succeed(alarm, "received SIGALRM")
      if (ignored.has(constants.signals[signal]) && constants.signals[signal] !== args.signal) return
      // an unreaped leader keeps its group id reserved, so the signal cannot hit a stranger
      const running = Option.isNone(yield* group.exitStatus)
      if (signal === "SIGTSTP") return yield* suspend(group, args, running)
      if (!running) return
      if (signal === "SIGCONT") return yield* group.signal(signal)
      if (args.verbose) yield* say(`received ${signal}: passing it on to group ${group.pid}`)
      yield* group.signal(signal)
      if (signal === "SIGWINCH") return
      yield* group.signal("SIGCONT")
      yield* escalate(signal)
    })
}

const onTimeout = (group: ProcessGroup.ProcessGroup, why: string, args: RunArgs, log: StopLog) =>
  Effect.gen(function*() {
    const signal = Signals.toNode(args.signal)
    if (args.verbose) yield* say(`${why}: stopping group ${group.pid}${args.signal === 15 ? "" : ` with SIG${Signals.nameOf(args.signal)}`}`)
    yield* stopAndReport(group, args, log, { signal })
    // the stop counts a zombie leader as gone before Node has reaped it
    const status = yield* Effect.timeoutOption(Effect.interruptible(group.awaitExit), "1 second")
    return ExitCode.exit(ExitCode.afterTimeout(Option.getOrUndefined(status), args.preserveStatus))
  })

const settle = (group: ProcessGroup.ProcessGroup, outcome: Outcome, args: RunArgs, log: StopLog) =>
  outcome._tag === "Exited"
    ? Effect.as(stopAndReport(group, args, log), ExitCode.endingOf(outcome.status))
    : onTimeout(group, outcome.why, args, log)

/** What CMD starts with ignored: what corral's caller ignored, but for what timeout(1) itself handles or resets. */
const ignoredForCommand = (ignored: ReadonlySet<number>, args: RunArgs) => {
  const handled = new Set([args.signal, constants.signals.SIGALRM, constants.signals.SIGCHLD, constants.signals.SIGTTIN, constants.signals.SIGTTOU])
  return [...ignored].filter((n) => !handled.has(n))
}

const supervise = Effect.fn("Run.supervise")(function*(args: RunArgs, ignored: ReadonlySet<number>) {
  const received = yield* Signals.queue([...Signals.forwarded, ...Signals.jobControl])
  // the watcher stops CMD's group if corral itself is SIGKILLed
  const watcher = yield* Watcher.make
  yield* (yield* Containment).reapLeftovers
  const group = yield* ProcessGroup.spawn({ command: args.command, stdio: "inherit", ignoredSignals: ignoredForCommand(ignored, args) }).pipe(
    Effect.provideService(Watcher.Watcher, watcher)
  )
  const log: StopLog = { first: undefined }
  const alarm = yield* Deferred.make<string>()
  yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(received), makeForward(group, args, ignored, alarm, log))))
  const timer = Option.match(args.timeout, {
    onNone: () => Effect.never,
    onSome: (after) => Effect.as(sleepFor(after), `timed out after ${DurationInput.format(after)}`)
  })
  const outcome = yield* Effect.race(
    Effect.map(group.awaitExit, (status): Outcome => ({ _tag: "Exited", status })),
    Effect.map(Effect.race(timer, Deferred.await(alarm)), (why): Outcome => ({ _tag: "TimedOut", why }))
  )
  return yield* settle(group, outcome, args, log)
}, Effect.scoped)

const limitsLayer = (args: RunArgs) => Limits.layerConfig(Option.match(args.grace, { onNone: () => ({}), onSome: (grace) => ({ grace }) }))

const layer = (args: RunArgs) =>
  Containment.layer(Option.getOrUndefined(args.containment)).pipe(Layer.provideMerge(Layer.merge(ProcessTable.layer, limitsLayer(args))))

/** --foreground: CMD in corral's own group, signalled alone; no group, cell or watcher (internal/foreground.ts). */
const superviseForeground = (args: RunArgs, ignored: ReadonlySet<number>) =>
  Effect.flatMap(Limits, ({ grace }) => Foreground.supervise(args, ignored, ignoredForCommand(ignored, args), grace, sleepFor)).pipe(
    Effect.provide(limitsLayer(args))
  )

type RunError = UsageError | ConfigError.ConfigError | ContainmentUnavailable | ProcessGroup.ProcessGroupError

const exitCodeOf = (error: RunError): number => {
  if (error._tag !== "SpawnError") return ExitCode.Failed
  return error.code === "ENOENT" ? ExitCode.NotFound : ExitCode.CannotInvoke
}

const messageOf = (error: RunError): string =>
  error._tag === "ConfigError" ? `bad configuration: ${error}` : error.message

const program = (argv: ReadonlyArray<string>, ignored: ReadonlySet<number>) =>
  Effect.gen(function*() {
    const parsed = yield* RunArgsParser.parse(argv)
    if (parsed._tag === "Help") return yield* Effect.as(Effect.sync(() => writeOut(usage)), ExitCode.exit(0))
    if (parsed.args.foreground) return yield* superviseForeground(parsed.args, ignored)
    return yield* Effect.provide(supervise(parsed.args, ignored), layer(parsed.args))
  }).pipe(
    Effect.catchAll((error: RunError) => Effect.as(say(messageOf(error)), ExitCode.exit(exitCodeOf(error)))),
    // CMD owns stdout: corral's own warnings go to stderr
    Effect.provide(StderrLogger.layer)
  )

/**
 * Runs `corral run` with the words after `run`; sets the process's exit
 * code when done, or dies of CMD's signal.
 */
export const main = (argv: ReadonlyArray<string>): void => {
  // first: it takes the launcher's variable out of the environment CMD inherits
  const ignored = Signals.ignoredAtStart()
  void Effect.runPromiseExit(program(argv, ignored)).then((exit) => {
    if (Exit.isFailure(exit)) {
      printFailure(exit.cause)
      process.exitCode = ExitCode.Failed
    } else if (exit.value._tag === "Die") Signals.dieOf(exit.value.signal)
    else process.exitCode = exit.value.code
  })
}
