/** The `bash` tool: checks, the permission gate, then a foreground command or a background shell. */
import * as path from "node:path"
import type { CommandShell } from "@corral/core/CommandShell"
import { Limits } from "@corral/core/Limits"
import * as DurationInput from "@corral/core/DurationInput"
import type { TerminalSize } from "@corral/core/Shell"
import { defaultTerminalSize, MAX_TERMINAL_SIZE } from "@corral/core/Shell"
import type { ShellEvent, ShellInfo } from "@corral/core/ShellRegistry"
import { ShellRegistry, withShell } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { Decision, PermissionGate } from "../PermissionGate.js"
import type { BashParams } from "../ShellTools.js"
import type { ToolResult } from "../ToolResult.js"
import { invalidInput, ToolError } from "../ToolResult.js"
import { DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS } from "./bounds.js"
import { cap } from "./cap.js"
import { toToolError } from "./errors.js"
import * as Format from "./format.js"
import { screenText } from "../ScreenText.js"
import * as Foreground from "./foreground.js"
import { CUT_HINT } from "./foreground.js"
import type { Settings } from "./settings.js"

type Params = BashParams

/** How long a background start waits for the first output. */
const FIRST_OUTPUT_MS = 200

const validate = (params: Params, settings: Settings) =>
  Effect.gen(function*() {
    if (params.command.trim() === "") {
      return yield* invalidInput("command is empty: pass the command line to run, for example `npm test`")
    }
    if (params.command.includes("\0")) {
      return yield* invalidInput("command contains a NUL byte (\\0), which no process can receive: remove it")
    }
    if (params.workdir?.includes("\0")) {
      return yield* invalidInput("workdir contains a NUL byte (\\0), which no path can hold: remove it")
    }
    const background = params.run_in_background === true
    const timeout = params.timeout ?? DEFAULT_TIMEOUT_MS
    if (!background && (!Number.isInteger(timeout) || timeout < 1)) {
      return yield* invalidInput(`timeout must be a whole number of milliseconds, at least 1; got ${params.timeout}`)
    }
    if (!background && timeout > MAX_TIMEOUT_MS) {
      return yield* invalidInput(
        `timeout ${timeout} ms is over the maximum of ${MAX_TIMEOUT_MS} ms (10 minutes): for a longer command, set run_in_background: true and wait for it with bash_output wait_for`
      )
    }
    const yieldMs = params.yield_ms
    if (yieldMs !== undefined && (!Number.isInteger(yieldMs) || yieldMs < 1 || yieldMs > MAX_TIMEOUT_MS)) {
      return yield* invalidInput(
        `yield_ms must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}; got ${yieldMs}. It is how long to wait before the command goes on in the background.`
      )
    }
    if (yieldMs !== undefined && background) {
      return yield* invalidInput("yield_ms applies to a foreground command, and run_in_background returns at once: pass one of them")
    }
    for (const [name, value] of [["cols", params.cols], ["rows", params.rows]] as const) {
      if (value === undefined) continue
      if (params.tty !== true) return yield* invalidInput(`${name} sizes the terminal of tty: true: add tty: true, or drop ${name}`)
      if (!Number.isInteger(value) || value < 1 || value > MAX_TERMINAL_SIZE) {
        return yield* invalidInput(`${name} must be a whole number from 1 to ${MAX_TERMINAL_SIZE}; got ${value}`)
      }
    }
    return {
      command: params.command,
      description: params.description,
      cwd: path.resolve(settings.cwd, params.workdir ?? "."),
      background,
      timeout,
      yieldMs,
      timeoutIgnored: (background || yieldMs !== undefined) && params.timeout !== undefined,
      terminal: terminalOf(params)
    }
  })

/**
 * A pseudo-terminal, when asked for: with TERM=dumb, so that REPLs and
 * prompts print text rather than draw a screen a model cannot see.
 */
const terminalOf = ({ cols, rows, tty }: Params): {
  /** What the shell's spec says of its terminal. */
  readonly spec: { readonly tty?: TerminalSize; readonly env?: { readonly TERM: string } }
  readonly tty: boolean
} =>
  tty === true
    ? { spec: { tty: { cols: cols ?? defaultTerminalSize.cols, rows: rows ?? defaultTerminalSize.rows }, env: { TERM: "dumb" } }, tty: true }
    : { spec: {}, tty: false }

const permit = (command: string) =>
  Effect.gen(function*() {
    const gate = yield* PermissionGate
    const subject = `bash ${command}`
    const decision = yield* gate.check("bash", subject)
    // the message names the command, not all of a long one
    const named = subject.length <= 100 ? subject : `${subject.slice(0, 99)}…`
    return yield* Decision.$match(decision, {
      Allow: () => Effect.void,
      Deny: ({ reason }) =>
        new ToolError({
          reason: "PermissionDenied",
          message: `permission denied for \`${named}\`: ${reason}. Do not retry it as is: take another approach, or ask the user.`
        }),
      Ask: ({ hint }) =>
        new ToolError({
          reason: "PermissionDenied",
          message: `\`${named}\` needs the user's approval, and this host has no way to ask for it. Tell the user what you want to run and why; they can allow it${
            hint === undefined ? " in the host's settings" : `: ${hint}`
          }, or run it themselves.`
        })
    })
  })

/** Said in the first result only: the model adapts its syntax once told. */
const shellNote = (shell: CommandShell, settings: Settings): ReadonlyArray<string> =>
  shell.note !== undefined && settings.firstShellNote() ? [`[note: ${shell.note}]`] : []

const ensureNewline = (text: string) => (text === "" || text.endsWith("\n") ? text : `${text}\n`)

/** The lines after a foreground command's output: how it ended, and what had to be stopped. */
const foregroundNotes = (done: Foreground.Finished, timeoutMs: number, grace: string): ReadonlyArray<string> => {
  const took = Format.duration(done.durationMs)
  const stopped = Format.stopText(done.stop, grace)
  if (done.timedOut) {
    return [
      `[timed out after ${took} (timeout: ${timeoutMs} ms); stopped its process group, ${Format.count(done.stop.members, "process")}: ${stopped}]`,
      `[to give it longer, pass a larger timeout (at most ${MAX_TIMEOUT_MS}), or run it with run_in_background: true and wait with bash_output wait_for]`
    ]
  }
  const exit = Option.match(done.exit, { onNone: () => "its leader survived SIGKILL", onSome: Format.exitText })
  const leftovers = done.stop.members === 0 ? [] : [
    `[stopped ${Format.count(done.stop.members, "process")} the command left running (${stopped}). To keep a process running after the command returns, start it with run_in_background: true.]`
  ]
  return [`[${exit} after ${took}]`, ...leftovers]
}

type Input = Effect.Effect.Success<ReturnType<typeof validate>>

const foreground = ({ command, cwd, terminal, timeout: timeoutMs }: Input, settings: Settings) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const { grace } = yield* Limits
    const tag = `${registry.supervisor.pid}:fg${settings.nextForeground()}`
    const done = yield* Foreground.run(withShell({ command, cwd, ...terminal.spec }, registry.shell, tag), Duration.millis(timeoutMs), registry.guard).pipe(
      Effect.mapError(toToolError)
    )
    const body = done.output.total === 0 ? "(no output)\n" : ensureNewline(done.output.text)
    const exit = Option.getOrUndefined(done.exit)
    return {
      text: body + [...foregroundNotes(done, timeoutMs, DurationInput.format(grace)), ...shellNote(registry.shell, settings)].join("\n"),
      metadata: {
        shell: registry.shell.path,
        exit_code: exit?._tag === "Exited" ? exit.code : undefined,
        signal: exit?._tag === "Signaled" ? exit.signal : undefined,
        timed_out: done.timedOut,
        duration_ms: done.durationMs,
        output_chars: done.output.total,
        cut_chars: done.output.cut,
        left_running: done.timedOut ? 0 : done.stop.members,
        stop: Format.stopMetadata(done.stop),
        shell_tag: tag
      }
    } satisfies ToolResult
  })

const background = ({ command, cwd, description, terminal, timeoutIgnored }: Input, settings: Settings) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const limits = yield* Limits
    // the description names the shell where people look: `corral ls`, a host's panel
    // stdin stays open, for write_stdin
    const started = yield* registry.start({ command, cwd, stdin: "pipe", ...terminal.spec }, { owner: settings.owner, name: description }).pipe(
      Effect.mapError(toToolError)
    )
    yield* Effect.sleep(Duration.millis(FIRST_OUTPUT_MS))
    // a look that moves no cursor: the first bash_output (and its wait_for) sees this output too
    const first = yield* registry.output(started.id, { mode: "all" }).pipe(Effect.mapError(toToolError))
    const now = yield* Clock.currentTimeMillis
    const id = started.id
    const output = cap(screenText(first.text, terminal.tty), `read it in parts with bash_output tail_lines or filter`)
    const lines = [
      `Started background shell ${id} (pid ${started.pid}): ${command}`,
      ...(timeoutIgnored ? ["(timeout does not apply to a background shell and was ignored)"] : []),
      ...shellNote(registry.shell, settings),
      first.text === "" ? "No output yet." : `Output so far:\n${ensureNewline(output.text)}`.trimEnd(),
      ...(first.dropped > 0 ? [Format.droppedNote(first.dropped, limits.bufferBytes, "Use filter or tail_lines to find what matters.")] : []),
      Format.statusLine(first.info, now),
      `Read its output with bash_output {"shell_id": "${id}"} (the first read starts from the beginning); to wait for a line such as "ready", add "wait_for": "ready|listening" instead of sleeping.`,
      `Stop it, and everything it started, with kill_bash {"shell_id": "${id}"} as soon as you no longer need it.`
    ]
    return {
      text: lines.join("\n"),
      metadata: { ...Format.shellMetadata(first.info, now), shell: registry.shell.path, background: true }
    } satisfies ToolResult
  })

/** The registry's end of shell `id`: its final info. */
const ended = (events: Stream.Stream<ShellEvent>, id: string) =>
  events.pipe(
    Stream.filter((e): e is Extract<ShellEvent, { info: ShellInfo }> => (e._tag === "Exited" || e._tag === "Killed") && e.info.id === id),
    Stream.runHead
  )

/**
 * A foreground command that becomes a background shell if it outlives
 * `yieldMs`: it runs as a shell from the start, so nothing is restarted and
 * no output is lost when it goes on, and the registry's limits hold from then.
 */
const yielding = ({ command, cwd, description, terminal, timeoutIgnored }: Input, waitMs: number, settings: Settings) =>
  Effect.scoped(Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const limits = yield* Limits
    const events = yield* registry.subscribe
    const started = yield* registry.start({ command, cwd, stdin: "pipe", ...terminal.spec }, { owner: settings.owner, name: description }).pipe(
      Effect.mapError(toToolError)
    )
    const id = started.id
    const end = yield* Effect.timeoutOption(ended(events, id), Duration.millis(waitMs))
    const read = yield* registry.output(id, { mode: Option.isSome(end) ? "new" : "all", reader: settings.reader }).pipe(Effect.mapError(toToolError))
    const now = yield* Clock.currentTimeMillis
    const output = cap(screenText(read.text, terminal.tty), Option.isSome(end) ? CUT_HINT : "read it in parts with bash_output tail_lines or filter")
    const body = read.text === "" ? "(no output)" : ensureNewline(output.text).trimEnd()
    const dropped = read.dropped > 0 ? [Format.droppedNote(read.dropped, limits.bufferBytes, "Redirect the output to a file to keep all of it.")] : []
    const ignored = timeoutIgnored ? ["(timeout does not apply with yield_ms and was ignored)"] : []
    if (Option.isSome(end)) {
      return {
        text: [body, ...dropped, `[${Format.statusWithTime(read.info, now)}]`, ...ignored, ...shellNote(registry.shell, settings)].join("\n"),
        metadata: { ...Format.shellMetadata(read.info, now), shell: registry.shell.path, yielded: false }
      } satisfies ToolResult
    }
    return {
      text: [
        `Still running after ${Format.duration(waitMs)} (yield_ms): it goes on as background shell ${id} (pid ${started.pid}), under the shell limits (stopped after ${DurationInput.format(limits.lifetime)}).`,
        ...ignored,
        ...shellNote(registry.shell, settings),
        read.text === "" ? "No output yet." : `Output so far:\n${body}`,
        ...dropped,
        Format.statusLine(read.info, now),
        `Read what follows with bash_output {"shell_id": "${id}"} (the first read starts from the beginning), wait for its end or a line with "wait_for"; stop it with kill_bash {"shell_id": "${id}"}.`
      ].join("\n"),
      metadata: { ...Format.shellMetadata(read.info, now), shell: registry.shell.path, yielded: true }
    } satisfies ToolResult
  }))

export const handle = Effect.fn("ShellTools.bash")(function*(params: Params, settings: Settings) {
  const input = yield* validate(params, settings)
  yield* permit(input.command)
  if (input.background) return yield* background(input, settings)
  if (input.yieldMs !== undefined) return yield* yielding(input, input.yieldMs, settings)
  return yield* foreground(input, settings)
})
