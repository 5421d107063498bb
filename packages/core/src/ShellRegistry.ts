/**
 * The registry of background shells: ids, limits, lifetime, retention,
 * events and ownership. Releasing the layer stops every shell; a watcher
 * process and a journal stop them when the supervisor dies without that.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as Journal from "./Journal.js"
import { Limits } from "./Limits.js"
import type { InvalidTerminalSize, ProcessGroupError, SpawnSpec, TerminalSize } from "./ProcessGroup.js"
import * as ProcessGroup from "./ProcessGroup.js"
import type { OutputChunk } from "./OutputBuffer.js"
import * as CommandShell from "./CommandShell.js"
import { Containment } from "./Containment.js"
import { ProcessTable } from "./ProcessTable.js"
import { underCallerSpan } from "./internal/callerSpan.js"
import * as RegistryAdmission from "./internal/registryAdmission.js"
import * as RegistryCrashSafety from "./internal/registryCrashSafety.js"
import * as RegistryInput from "./internal/registryInput.js"
import * as RegistryLifecycle from "./internal/registryLifecycle.js"
import * as RegistryShells from "./internal/registryShells.js"
import * as ShellOutput from "./internal/shellOutput.js"

// declared once, as schemas, in Shell.ts; the registry's surface all the same
export { isActive, ShellInfo, ShellStatus, StopCause } from "./Shell.js"
import type { ShellInfo, StopReport } from "./Shell.js"

export type ShellEvent =
  | { readonly _tag: "Started"; readonly info: ShellInfo }
  /** The leader exited and members of its group still run (once per shell). */
  | { readonly _tag: "Lingering"; readonly info: ShellInfo }
  | { readonly _tag: "Exited"; readonly info: ShellInfo }
  | { readonly _tag: "Killed"; readonly info: ShellInfo; readonly report: StopReport }
  | { readonly _tag: "Dropped"; readonly id: string }

export type OutputMode = "new" | "tail" | "all"

export interface OutputOptions {
  /** `new` (default): what arrived since this reader's last read. */
  readonly mode?: OutputMode | undefined
  /** Lines for `tail` mode. */
  readonly lines?: number | undefined
  /** Keep only lines matching this pattern. */
  readonly filter?: string | undefined
  /** Wait until a new line matches, the shell ends, or `waitMs` passes. */
  readonly waitFor?: string | undefined
  readonly waitMs?: number | undefined
  /** Cursor owner for `new` mode; readers do not steal each other's output. */
  readonly reader?: string | undefined
}

export interface OutputResult {
  readonly text: string
  readonly info: ShellInfo
  /** Bytes dropped from the buffer before this reader saw them. */
  readonly dropped: number
  /** Bytes the shell has written since it started, kept or not. */
  readonly written: number
  /** With `waitFor`: which came first. */
  readonly waited?: "matched" | "exited" | "timeout" | undefined
}

// defined beside the code that raises them; the registry's public errors all the same
export { UnknownShell } from "./internal/registryShells.js"
export { RegistryClosed, TooManyShells } from "./internal/registryAdmission.js"
export { NoStdin, NoTerminal, NotOwner } from "./internal/registryInput.js"
export { InvalidOption, InvalidPattern, MAX_PATTERN_CHARS } from "./internal/shellOutput.js"
import type { RegistryClosed, TooManyShells } from "./internal/registryAdmission.js"
import type { NoStdin, NoTerminal, NotOwner } from "./internal/registryInput.js"
import type { UnknownShell } from "./internal/registryShells.js"
import type { InvalidOption, InvalidPattern } from "./internal/shellOutput.js"

export type StartError = ProcessGroupError | TooManyShells | RegistryClosed

export interface StartOptions {
  readonly owner: string
  readonly name?: string | undefined
}

export interface RegistryOptions {
  /** Shown by `corral ls`; default: the program's name. */
  readonly name?: string | undefined
  /** Watcher process and journal; default on. */
  readonly crashSafety?: boolean | undefined
  /**
   * The journal alone, with crash safety on; default on. Off, the watcher
   * still stops the shells if the supervisor dies, but nothing does if both
   * die: for a state directory that cannot be used.
   */
  readonly journal?: boolean | undefined
  /** Default: `StateDir.resolve`. */
  readonly stateDir?: string | undefined
  /**
   * The shell that runs command lines (`shell -c`) unless a start names its
   * own, by path or as resolved; default bash (see `CommandShell.resolveDefault`).
   */
  readonly shell?: string | CommandShell.CommandShell | undefined
}

export class ShellRegistry extends Context.Tag("@corral/core/ShellRegistry")<ShellRegistry, {
  /**
   * Starts a shell and returns once it runs. Traced as `ShellRegistry.start`
   * where the caller is (inside a span of its own); a bare call makes no
   * span, as one costs a start 0.2 ms when nothing warmed the tracing code (ADR 59).
   */
  readonly start: (spec: SpawnSpec, options: StartOptions) => Effect.Effect<ShellInfo, StartError>
  readonly output: (id: string, options?: OutputOptions) => Effect.Effect<OutputResult, UnknownShell | InvalidPattern | InvalidOption>
  /** Stops the shell (only its owner may) and returns its stop's report. Traced as `ShellRegistry.kill` where the caller is, as `start`. */
  readonly kill: (id: string, options: { readonly owner: string }) => Effect.Effect<StopReport, UnknownShell | NotOwner>
  /** Writes to the shell's stdin, or closes it with `eof`; only its owner may. */
  readonly write: (
    id: string,
    input: { readonly text?: string | undefined; readonly eof?: boolean | undefined },
    options: { readonly owner: string }
  ) => Effect.Effect<void, UnknownShell | NotOwner | NoStdin>
  /**
   * Resizes the shell's terminal (`tty`), whose foreground job gets SIGWINCH;
   * only its owner may.
   */
  readonly resize: (
    id: string,
    size: TerminalSize,
    options: { readonly owner: string }
  ) => Effect.Effect<void, UnknownShell | NotOwner | NoTerminal | InvalidTerminalSize>
  /** Sends `signal` to the shell's whole process group (Ctrl-C is SIGINT); only its owner may. */
  readonly signal: (id: string, signal: NodeJS.Signals, options: { readonly owner: string }) => Effect.Effect<void, UnknownShell | NotOwner>
  /** Lines kept that `reader` has not read yet in `new` mode; reads nothing for it. */
  readonly unread: (id: string, reader: string) => Effect.Effect<number, UnknownShell>
  readonly info: (id: string) => Effect.Effect<ShellInfo, UnknownShell>
  readonly list: Effect.Effect<ReadonlyArray<ShellInfo>>
  /**
   * One shell's output as it arrives (with `retained`, from its oldest
   * retained byte), ending when its output ends. Read from the shell's buffer
   * as the stream is pulled, so a reader that stalls holds no output; one that
   * falls more than the buffer behind skips what was dropped meanwhile, and
   * the next chunk's offset jumps by that much.
   */
  readonly follow: (id: string, options?: { readonly retained?: boolean }) => Effect.Effect<Stream.Stream<OutputChunk>, UnknownShell>
  /** Lifecycle events; each subscriber sees each shell's events in order. Ends after the shutdown's last event. */
  readonly events: Stream.Stream<ShellEvent>
  /** Subscribes now, so no event after this point is missed. The stream ends after the shutdown's last event. */
  readonly subscribe: Effect.Effect<Stream.Stream<ShellEvent>, never, Scope.Scope>
  /** Subscribes now, as a queue to drain when the reader likes: no fiber needed to keep up. A queue has no end. */
  readonly subscribeQueue: Effect.Effect<Queue.Dequeue<ShellEvent>, never, Scope.Scope>
  /**
   * Stops every shell (cause `shutdown`), refuses starts from then on, and
   * ends the event streams after the shutdown's events. Releasing the layer
   * runs it; it runs once, and a second call waits for the first. For a
   * consumer of the events whose own release must still see the shutdown's
   * (`AcpShellRows.layer`): layers built on the registry are released
   * before it, so they run this first.
   */
  readonly shutdown: Effect.Effect<void>
  /**
   * Puts a group started outside the registry (a foreground command) under
   * the watcher for the scope's lifetime, so it too is stopped if the
   * supervisor dies.
   */
  readonly guard: (group: ProcessGroup.ProcessGroup) => Effect.Effect<void, never, Scope.Scope>
  /** The shell command lines run with, and a note when it is not bash. */
  readonly shell: CommandShell.CommandShell
  /** This supervisor's identity, as recorded in its journal. */
  readonly supervisor: Journal.Supervisor
  /**
   * Names the supervisor for `corral ls`, `show` and `top`, once it knows who
   * it serves (an MCP client's name arrives after the registry started).
   */
  readonly rename: (name: string) => Effect.Effect<void>
  readonly stateDir: string
}>() {
  static readonly layer = (options: RegistryOptions = {}) => Layer.scoped(ShellRegistry, make(options))

  /** Limits from the environment (see `Limits.layerConfig`), the process table for this platform. */
  static readonly layerConfig = (options: RegistryOptions = {}) =>
    ShellRegistry.layer(options).pipe(
      Layer.provide(Containment.layer().pipe(Layer.provideMerge(Layer.mergeAll(Limits.layerConfig(), ProcessTable.layer))))
    )
}

const make = Effect.fn("ShellRegistry.make")(function*(options: RegistryOptions) {
  const limits = yield* Limits
  const shells = yield* RegistryShells.make(limits.retention)
  const safety = yield* RegistryCrashSafety.make(options, shells)
  // the spawn's services (the watcher among them, with crash safety) resolved once, not at every start
  const spawn = yield* Effect.provide(ProcessGroup.spawner, safety.spawnContext)
  const life = yield* RegistryLifecycle.make({ limits, containment: yield* Containment, shells, journal: safety.journal, emptied: safety.emptied, spawn })
  const admission = yield* RegistryAdmission.make({ limits, shells, dropNow: life.dropNow })
  const input = RegistryInput.make(shells)
  const commandShell: CommandShell.CommandShell = options.shell === undefined
    ? CommandShell.resolveDefault()
    : typeof options.shell === "string"
    ? { path: options.shell }
    : options.shell
  // the layer's release, or a consumer's before it: whoever comes second waits for the first
  const shutdown = yield* Effect.cached(Effect.uninterruptible(admission.close(life.shutdown)))
  yield* Effect.addFinalizer(() => shutdown)

  const start = Effect.fnUntraced(function*(spec: SpawnSpec, startOptions: StartOptions) {
    const info = yield* admission.admitted((id) => {
      const tag = `${Journal.keyOf(safety.supervisor())}:${id}`
      return life.launch(id, tag, withShell(spec, commandShell, tag), startOptions)
    })
    // the first filter or waitFor on a shell should not wait for a thread to
    // start; a registry that runs no shell (a server that has only answered
    // `initialize`) starts none
    yield* ShellOutput.warm
    return info
  }, underCallerSpan("ShellRegistry.start"))

  const kill = Effect.fnUntraced(function*(id: string, killOptions: { readonly owner: string }) {
    return yield* life.kill(yield* input.owned(id, killOptions.owner))
  }, underCallerSpan("ShellRegistry.kill"))

  return ShellRegistry.of({
    start,
    ...ShellOutput.make(shells),
    kill,
    write: input.write,
    signal: input.signal,
    resize: input.resize,
    info: (id) => Effect.flatMap(shells.lookup(id), RegistryShells.infoOf),
    list: shells.list,
    events: shells.events,
    subscribe: shells.subscribe,
    subscribeQueue: shells.subscribeQueue,
    shutdown,
    guard: safety.guard,
    shell: commandShell,
    get supervisor() {
      return safety.supervisor()
    },
    rename: safety.rename,
    stateDir: safety.stateDir
  })
})

/**
 * A spec as the registry runs it: its shell, the unbuffered environment, its
 * tag. The supervisor's own environment is added by the spawn (`extendEnv`),
 * not copied here as well: a copy of `process.env` costs a call into the
 * runtime per variable, on every start's path.
 */
export const withShell = (spec: SpawnSpec, shell: CommandShell.CommandShell, shellId: string): SpawnSpec => ({
  ...spec,
  shell: spec.shell ?? shell.path,
  env: spec.extendEnv === false
    ? CommandShell.environment(spec.env ?? {})
    : { ...CommandShell.unbufferedUnset(process.env), ...spec.env },
  shellId
})
