/**
 * `@effect/platform`'s `CommandExecutor`, backed by corral: code written
 * against `Command` (`Command.start`, `Command.string`, `Command.lines`,
 * `Command.exitCode`, pipes) runs unchanged, and every process it starts is
 * a corral `ProcessGroup`:
 *
 * - it runs in a session and group of its own, held by the `Containment`
 *   backend and tagged with `CORRAL_SHELL_ID`, so a `setsid` escaper, a
 *   job-control group or a TERM-ignoring forker is still part of it;
 * - closing the scope stops the whole group (SIGTERM, the grace, then SIGKILL
 *   until nothing is left) and returns only once it is empty, also when the
 *   leader exited 0 and left children running, where the stock executor stops
 *   nothing;
 * - `process.kill(signal)` is that stop with `signal` first, and returns
 *   once the leader's exit is known: it never waits forever on a process
 *   that ignores the signal;
 * - zombies left by a PID 1 that never reaps count as gone, so no stop waits
 *   out its grace for them.
 *
 * Errors are the stock ones: a missing program is `SystemError` `NotFound`
 * (module `Command`, method `spawn`), a program that may not run is
 * `PermissionDenied`, a missing working directory `NotFound`, and a process
 * ended by a signal fails `exitCode` as the stock executor's does.
 */
import * as Command from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as PlatformError from "@effect/platform/Error"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Sink from "effect/Sink"
import * as Stream from "effect/Stream"
import { Containment, type ContainmentUnavailable } from "./Containment.js"
import { Limits, type LimitsShape } from "./Limits.js"
import * as ProcessGroup from "./ProcessGroup.js"
import { ProcessTable } from "./ProcessTable.js"
import * as Watcher from "./Watcher.js"

type Requirements = Containment | Limits | ProcessTable

const describeCommand = (command: Command.Command): string =>
  Command.flatten(command).map((c) => `${c.command} ${c.args.join(" ")}`).join(" | ")

const reasonOf = (code: string): PlatformError.SystemErrorReason =>
  code === "ENOENT" ? "NotFound" : code === "EACCES" || code === "EPERM" ? "PermissionDenied" : "Unknown"

/** corral's spawn errors as the stock executor reports them, so `catchTag("SystemError")` code keeps working. */
const toPlatformError = (command: Command.StandardCommand) => (error: ProcessGroup.ProcessGroupError): PlatformError.PlatformError => {
  switch (error._tag) {
    case "SpawnError":
      return new PlatformError.SystemError({
        reason: reasonOf(error.code),
        module: "Command",
        method: "spawn",
        pathOrDescriptor: describeCommand(command),
        syscall: `spawn ${command.command}`,
        description: `spawn ${command.command} ${error.code}`,
        cause: error.cause
      })
    case "InvalidCwd":
      return error.reason === "nul-byte"
        ? new PlatformError.BadArgument({ module: "Command", method: "spawn", description: error.message })
        : new PlatformError.SystemError({
          reason: error.reason === "missing" ? "NotFound" : "Unknown",
          module: "Command",
          method: "spawn",
          pathOrDescriptor: error.cwd,
          description: error.message
        })
    case "EmptyCommand":
    case "InvalidCommand":
    // a Command never asks for a terminal
    case "TtyUnavailable":
    case "InvalidTerminalSize":
      return new PlatformError.BadArgument({ module: "Command", method: "spawn", description: error.message })
  }
}

const streamError = (command: Command.StandardCommand, method: string) => (cause: unknown) =>
  new PlatformError.SystemError({
    reason: "Unknown",
    module: "Command",
    method,
    pathOrDescriptor: describeCommand(command),
    description: String(cause),
    cause
  })

const ProcessProto = {
  [CommandExecutor.ProcessTypeId]: CommandExecutor.ProcessTypeId,
  ...Inspectable.BaseProto,
  toJSON(this: CommandExecutor.Process) {
    return { _id: "@effect/platform/CommandExecutor/Process", pid: this.pid }
  }
}

const toSpec = (command: Command.StandardCommand): ProcessGroup.SpawnSpec => ({
  // `shell` joins the words, as Node's spawn does with `shell`
  command: command.shell === false ? [command.command, ...command.args] : [command.command, ...command.args].join(" "),
  ...(typeof command.shell === "string" ? { shell: command.shell } : {}),
  cwd: Option.getOrUndefined(command.cwd),
  env: Object.fromEntries(command.env),
  extendEnv: command.extendEnv,
  stdio: [
    typeof command.stdin === "string" ? command.stdin : "pipe",
    typeof command.stdout === "string" ? command.stdout : "pipe",
    typeof command.stderr === "string" ? command.stderr : "pipe"
  ]
})

const exitCodeOf = (command: Command.StandardCommand, status: ProcessGroup.ExitStatus) =>
  status._tag === "Exited"
    ? Effect.succeed(CommandExecutor.ExitCode(status.code))
    : Effect.fail(
      new PlatformError.SystemError({
        reason: "Unknown",
        module: "Command",
        method: "exitCode",
        pathOrDescriptor: describeCommand(command),
        description: `Process interrupted due to receipt of signal: ${status.signal}`
      })
    )

const startStandard = (command: Command.StandardCommand): Effect.Effect<CommandExecutor.Process, PlatformError.PlatformError, Scope.Scope | Requirements> =>
  Effect.gen(function*() {
    const group = yield* Effect.mapError(ProcessGroup.spawn(toSpec(command)), toPlatformError(command))
    const { stdin, stdout, stderr } = group.stdio
    const rawStdout = stdout === null ? Stream.empty : NodeStream.fromReadable(() => stdout, streamError(command, "fromReadable(stdout)"))
    const process: CommandExecutor.Process = Object.assign(Object.create(ProcessProto), {
      pid: CommandExecutor.ProcessId(group.pid),
      exitCode: Effect.flatMap(group.awaitExit, (status) => exitCodeOf(command, status)),
      isRunning: Effect.map(group.exitStatus, Option.isNone),
      // the whole group's stop, `signal` first: it ends even if the signal is ignored
      kill: (signal: CommandExecutor.Signal = "SIGTERM") =>
        group.stop(signal === "SIGKILL" ? { signal, grace: 0 } : { signal }).pipe(Effect.zipRight(group.awaitExit), Effect.asVoid),
      stdin: stdin === null ? Sink.drain : NodeSink.fromWritable(() => stdin, streamError(command, "toWritable")),
      stdout: typeof command.stdout === "string" ? rawStdout : Stream.transduce(rawStdout, command.stdout),
      stderr: stderr === null ? Stream.empty : NodeStream.fromReadable(() => stderr, streamError(command, "fromReadable(stderr)"))
    })
    // a stream given as stdin is fed for as long as the process's scope lasts
    if (typeof command.stdin !== "string") yield* Effect.forkScoped(Stream.run(command.stdin, process.stdin))
    return process
  })

/** Starts `command`, a pipeline stage by stage: each stage is a group of its own, its stdout the next one's stdin. */
const starter = (context: Context.Context<Requirements>) => {
  const start = (command: Command.Command): Effect.Effect<CommandExecutor.Process, PlatformError.PlatformError, Scope.Scope> => {
    const [head, ...tail] = Command.flatten(command)
    if (tail.length === 0) return Effect.provide(startStandard(head), context)
    const stdoutOf = (stage: Command.Command) => Stream.unwrapScoped(Effect.map(start(stage), (p) => p.stdout))
    const last = tail[tail.length - 1]!
    const feed = tail.slice(0, -1).reduce((stdin, stage) => stdoutOf(Command.stdin(stage, stdin)), stdoutOf(head))
    return start(Command.stdin(last, feed))
  }
  return start
}

/**
 * The executor over the services of the context it is built in, and its
 * `Watcher` when there is one (then a SIGKILLed host leaves no group behind).
 */
export const make: Effect.Effect<CommandExecutor.CommandExecutor, never, Requirements> = Effect.gen(function*() {
  // only these services: the whole context would carry the layer's own Scope, and every process would live as long as the layer
  const context = Context.pick(Containment, Limits, ProcessTable)(yield* Effect.context<Requirements>())
  const watcher = yield* Effect.serviceOption(Watcher.Watcher)
  const withWatcher: Context.Context<Requirements> = Option.match(watcher, {
    onNone: () => context,
    onSome: (w) => Context.add(context, Watcher.Watcher, w)
  })
  return CommandExecutor.makeExecutor(starter(withWatcher))
})

/** `CommandExecutor` backed by corral, over the host's containment, limits and process table (and watcher, if any). */
export const layer: Layer.Layer<CommandExecutor.CommandExecutor, never, Requirements> = Layer.effect(CommandExecutor.CommandExecutor, make)

export interface ConfigOptions {
  /** Overrides of the limits read from `Config` (`CORRAL_GRACE`, ...). */
  readonly limits?: Partial<LimitsShape> | undefined
  /** A watcher process that stops every group if the host is SIGKILLed. Default on. */
  readonly crashSafety?: boolean | undefined
}

/**
 * `layer` with its own containment (`CORRAL_CONTAINMENT`, else the best that
 * works), limits from `Config` (`Limits.layerConfig`), the process table and
 * a watcher: in place of `NodeCommandExecutor.layer` (or the one in
 * `NodeContext.layer`), provided closer to the program than it.
 */
export const layerConfig = (
  options: ConfigOptions = {}
): Layer.Layer<CommandExecutor.CommandExecutor, ConfigError.ConfigError | ContainmentUnavailable> => {
  const executor = options.crashSafety === false
    ? layer
    : Layer.scoped(CommandExecutor.CommandExecutor, Effect.flatMap(Watcher.make, (w) => Effect.provideService(make, Watcher.Watcher, w)))
  return executor.pipe(
    Layer.provide(Containment.layer().pipe(Layer.provideMerge(Layer.merge(Limits.layerConfig(options.limits), ProcessTable.layer))))
  )
}
