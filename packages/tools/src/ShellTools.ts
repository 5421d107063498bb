/**
 * `bash`, `bash_output`, `kill_bash` and `list_shells`, defined once as
 * `@effect/ai` tools: the same toolkit serves Effect AI language models, an
 * MCP server (`McpTools`) and hosts calling model APIs directly
 * (`toolDefinitions`). The descriptions are written for the model: they are
 * the only manual it gets.
 */
import type { Limits } from "@corral/core/Limits"
import type { Containment } from "@corral/core/Containment"
import type { ProcessTable } from "@corral/core/ProcessTable"
import type { ShellRegistry } from "@corral/core/ShellRegistry"
import { defaultTerminalSize, MAX_TERMINAL_SIZE } from "@corral/core/Shell"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Bash from "./internal/bash.js"
import {
  DEFAULT_INPUT_WAIT_MS,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_WAIT_MS,
  MAX_INPUT_WAIT_MS,
  MAX_TAIL_LINES,
  MAX_TIMEOUT_MS,
  MAX_WAIT_MS
} from "./internal/bounds.js"
import * as BashOutput from "./internal/bashOutput.js"
import * as KillBash from "./internal/killBash.js"
import * as ListShells from "./internal/listShells.js"
import * as Notices from "./internal/notices.js"
import * as Settings from "./internal/settings.js"
import * as Strict from "./internal/strict.js"
import * as WriteStdin from "./internal/writeStdin.js"
import type { PermissionGate } from "./PermissionGate.js"
import * as ToolDefinition from "./ToolDefinition.js"
import { ToolError, ToolResult } from "./ToolResult.js"

export { DEFAULT_TIMEOUT_MS, DEFAULT_WAIT_MS, MAX_TAIL_LINES, MAX_TIMEOUT_MS, MAX_WAIT_MS } from "./internal/bounds.js"

const integer = (description: string, bounds: { readonly minimum: number; readonly maximum?: number }) =>
  Schema.Number.annotations({ description, jsonSchema: { type: "integer", description, ...bounds } })

const text = (description: string) => Schema.String.annotations({ description })

const bashParameters = Strict.make("bash", {
  command: Schema.String.annotations({
    description: "The command line to run with bash -c. Quote paths that contain spaces.",
    jsonSchema: { minLength: 1 }
  }),
  workdir: Schema.optional(text("Directory to run in: absolute, or relative to the server's working directory (the default). It must exist.")),
  timeout: Schema.optional(integer(
    `Foreground only: milliseconds to wait before the command and everything it started are stopped. Default ${DEFAULT_TIMEOUT_MS} (2 minutes), at most ${MAX_TIMEOUT_MS} (10 minutes). It does not apply with run_in_background: a background shell runs until it ends or kill_bash stops it.`,
    { minimum: 1, maximum: MAX_TIMEOUT_MS }
  )),
  run_in_background: Schema.optional(Schema.Boolean.annotations({
    description: "Start the command in the background and return at once with a shell id: for servers, watchers and long jobs. Read it with bash_output, stop it with kill_bash."
  })),
  yield_ms: Schema.optional(integer(
    `Foreground only: milliseconds to wait for the command to end. If it ends by then, the result is as without it; if not, the result gives the output so far and a shell id, and the command goes on as a background shell (read it with bash_output, stop it with kill_bash) instead of being stopped. Use it when you cannot tell how long a command takes. At most ${MAX_TIMEOUT_MS}; timeout does not apply with it.`,
    { minimum: 1, maximum: MAX_TIMEOUT_MS }
  )),
  description: Schema.optional(text("What the command does, in 5-10 words, for the person watching.")),
  tty: Schema.optional(Schema.Boolean.annotations({
    description: "Run the command on a terminal (a pseudo-terminal) instead of pipes, for programs that need one: REPLs (python3 -i, node), prompts (npm init, ssh), programs that print nothing or wait forever without a terminal. Usually with run_in_background, then answer it with write_stdin. The output is what the terminal shows: your input echoed, colour codes removed."
  })),
  cols: Schema.optional(integer(
    `With tty: true, the terminal's width in columns. Default ${defaultTerminalSize.cols}, at most ${MAX_TERMINAL_SIZE}.`,
    { minimum: 1, maximum: MAX_TERMINAL_SIZE }
  )),
  rows: Schema.optional(integer(
    `With tty: true, the terminal's height in rows. Default ${defaultTerminalSize.rows}, at most ${MAX_TERMINAL_SIZE}.`,
    { minimum: 1, maximum: MAX_TERMINAL_SIZE }
  ))
})

export type BashParams = Strict.Params<typeof bashParameters>

export const BashTool = Tool.make("bash", {
  description: `Runs a command line with bash (bash -c) and returns its output, stdout and stderr interleaved, with its exit status. A command that exits non-zero is a result like any other, not a tool error: read its exit code on the last line.

Foreground (the default) waits for the command to end, for at most \`timeout\` ms (default ${DEFAULT_TIMEOUT_MS}, 2 minutes; at most ${MAX_TIMEOUT_MS}, 10 minutes). On timeout the command and everything it started are stopped. Output longer than 30000 characters keeps its beginning and its end. When the command returns, anything it left running (\`cmd &\`) is stopped.

Set run_in_background: true for dev servers, watchers, long builds and anything you want to keep running while you work. It returns at once with a shell id and the first output. Then:
- read new output with bash_output. To wait until a server is ready, give bash_output wait_for (a regular expression such as "ready|listening") instead of sleeping or polling in a loop;
- stop it with kill_bash as soon as you no longer need it. Always stop what you start.
Do not background a command with \`&\`, \`nohup\` or \`setsid\`: use run_in_background, so it can be read and stopped.

Set tty: true for a program that needs a terminal (a REPL, an interactive prompt); write to it with write_stdin.`,
  success: ToolResult,
  failure: ToolError,
  failureMode: "return"
}).setParameters(bashParameters.parameters)
  .annotate(Tool.Title, "Run a shell command")

const bashOutputParameters = Strict.make("bash_output", {
  shell_id: Schema.optional(text("The id bash returned for the background shell, such as s1.")),
  bash_id: Schema.optional(text("Accepted in place of shell_id, for clients that name it so; send shell_id.")),
  tail_lines: Schema.optional(integer(
    `Return the last N lines kept, instead of what is new since your last read. At most ${MAX_TAIL_LINES}; fewer come back when fewer are kept.`,
    { minimum: 1, maximum: MAX_TAIL_LINES }
  )),
  filter: Schema.optional(text("Keep only the lines matching this regular expression (JavaScript syntax).")),
  wait_for: Schema.optional(text("Wait for a new line matching this regular expression, or for the shell to end, before reading.")),
  wait_timeout: Schema.optional(integer(
    `With wait_for: milliseconds to wait at most. Default ${DEFAULT_WAIT_MS}, at most ${MAX_WAIT_MS}.`,
    { minimum: 0, maximum: MAX_WAIT_MS }
  ))
}, { required: ["shell_id"] })

export type BashOutputParams = Strict.Params<typeof bashOutputParameters>

export const BashOutputTool = Tool.make("bash_output", {
  description: `Reads the output of a background shell started with bash run_in_background, followed by a status line: running, exited with code N, killed by SIGTERM, ...

By default it returns only what is new since your last read. tail_lines returns the last N lines kept instead; filter keeps only the lines matching a regular expression.
wait_for waits until a new line matches a regular expression (such as "ready|listening|error"), the shell ends, or wait_timeout ms pass (default ${DEFAULT_WAIT_MS}, at most ${MAX_WAIT_MS}), then says which came first. Use it instead of sleep or repeated reads.`,
  success: ToolResult,
  failure: ToolError,
  failureMode: "return"
}).setParameters(bashOutputParameters.parameters)
  .annotate(Tool.Title, "Read a background shell's output")
  .annotate(Tool.Readonly, true)
  .annotate(Tool.Idempotent, true)
  .annotate(Tool.Destructive, false)
  .annotate(Tool.OpenWorld, false)

const killBashParameters = Strict.make("kill_bash", {
  shell_id: text("The id bash returned for the background shell, such as s1.")
})

export type KillBashParams = Strict.Params<typeof killBashParameters>

export const KillBashTool = Tool.make("kill_bash", {
  description: `Stops a background shell and every process it started: SIGTERM, then SIGKILL for whatever ignores it past the grace period. Says what was stopped and how. Stop a shell as soon as you no longer need it (a dev server once you are done with it, a watcher). Its output stays readable with bash_output for 30 minutes.`,
  success: ToolResult,
  failure: ToolError,
  failureMode: "return"
}).setParameters(killBashParameters.parameters)
  .annotate(Tool.Title, "Stop a background shell")
  .annotate(Tool.Destructive, true)
  .annotate(Tool.Idempotent, true)
  .annotate(Tool.OpenWorld, false)

const writeStdinParameters = Strict.make("write_stdin", {
  shell_id: text("The id bash returned for the background shell, such as s1."),
  text: Schema.optional(text(
    `What to write, such as "yes\n" (add the newline to send a line). Alone, a control key acts as at a terminal: "\u0003" (Ctrl-C) sends SIGINT to the shell's processes (on a tty shell: to its foreground job), "\u001c" (Ctrl-\\) SIGQUIT, "\u001a" (Ctrl-Z) SIGTSTP, "\u0004" (Ctrl-D) closes stdin (on a tty shell: end of file at the start of a line).`
  )),
  eof: Schema.optional(Schema.Boolean.annotations({ description: "Close stdin after the text (end of file), for programs that read until it; on a tty shell, type Ctrl-D after it." })),
  wait_ms: Schema.optional(integer(
    `Milliseconds to wait for what the shell prints in answer. Default ${DEFAULT_INPUT_WAIT_MS}, at most ${MAX_INPUT_WAIT_MS}; to wait for a particular line, use bash_output wait_for.`,
    { minimum: 0, maximum: MAX_INPUT_WAIT_MS }
  ))
})

export type WriteStdinParams = Strict.Params<typeof writeStdinParameters>

export const WriteStdinTool = Tool.make("write_stdin", {
  description: `Writes to a background shell's stdin (a REPL, a prompt that asks "Proceed? (y/N)", a program reading input), or sends it a control key, then returns what it printed within wait_ms. Background shells started by bash keep stdin open for this. A shell started with tty: true has a terminal: the text is typed into it, echoed, and "\u0003" (Ctrl-C) interrupts its foreground job. Other shells have a pipe, not a terminal: a control key alone acts as a terminal would make it act ("\u0003" is Ctrl-C: SIGINT to its processes; "\u0004" closes stdin). Only the shells you started.`,
  success: ToolResult,
  failure: ToolError,
  failureMode: "return"
}).setParameters(writeStdinParameters.parameters)
  .annotate(Tool.Title, "Write to a background shell's stdin")
  .annotate(Tool.Destructive, false)
  .annotate(Tool.Idempotent, false)
  .annotate(Tool.OpenWorld, false)

const listShellsParameters = Strict.make("list_shells", {})

export const ListShellsTool = Tool.make("list_shells", {
  description: `Lists the background shells: id, status, how long it has run, command. Use it to find a shell's id, and before you finish, to check that nothing you started is still running.`,
  success: ToolResult,
  failure: ToolError,
  failureMode: "return"
}).setParameters(listShellsParameters.parameters)
  .annotate(Tool.Title, "List background shells")
  .annotate(Tool.Readonly, true)
  .annotate(Tool.Idempotent, true)
  .annotate(Tool.Destructive, false)
  .annotate(Tool.OpenWorld, false)

export const toolkit = Toolkit.make(BashTool, BashOutputTool, KillBashTool, ListShellsTool, WriteStdinTool)

export type Tools = Toolkit.Tools<typeof toolkit>

export interface Options {
  /** Whose shells these are: `kill_bash` stops only the owner's own. Default `agent`. */
  readonly owner?: string | undefined
  /** Where commands run unless `workdir` says otherwise. Default: the process's working directory. */
  readonly cwd?: string | undefined
}

type Services = ShellRegistry | Limits | ProcessTable | Containment | PermissionGate

/** The handlers, bound to one owner; the registry, limits and gate come from the host. */
export const layer = (options: Options = {}): Layer.Layer<Tool.HandlersFor<Tools>, never, Services> =>
  toolkit.toLayer(Effect.gen(function*() {
    const context = yield* Effect.context<Services>()
    const settings = Settings.make(options)
    const notices = yield* Notices.make(settings.owner, settings.reader)
    /** Runs a handler, then adds the notices of shells that ended, but those whose status it states. */
    const told = (handler: Effect.Effect<ToolResult, ToolError, Services>, about: (id: string) => boolean) =>
      Effect.provide(handler, context).pipe(
        Effect.flatMap((result) =>
          Effect.map(notices.take((id) => about(id) || statesEnd(result, id)), (due) => Notices.addTo(result, due))
        ),
        Effect.catchAll((error) => Effect.flatMap(notices.take(about), (due) => Effect.fail(Notices.addToError(error, due))))
      )
    /** A bash result about a shell that has ended (it ended within yield_ms, or at once) says so itself. */
    const statesEnd = (result: ToolResult, id: string) =>
      result.metadata.shell_id === id && result.metadata.state !== "Running" && result.metadata.state !== "Lingering"
    const idGiven = (params: Readonly<Record<string, unknown>>) => (id: string) => id === params.shell_id || id === params.bash_id
    return toolkit.of({
      bash: (params) => told(Effect.flatMap(bashParameters.decode(params), (p) => Bash.handle(p, settings)), () => false),
      bash_output: (params) =>
        told(Effect.flatMap(bashOutputParameters.decode(params), (p) => BashOutput.handle(p, settings)), idGiven(params)),
      kill_bash: (params) => told(Effect.flatMap(killBashParameters.decode(params), (p) => KillBash.handle(p, settings)), idGiven(params)),
      write_stdin: (params) =>
        told(Effect.flatMap(writeStdinParameters.decode(params), (p) => WriteStdin.handle(p, settings)), idGiven(params)),
      // the list states every shell's status
      list_shells: (params) => told(Effect.flatMap(listShellsParameters.decode(params), () => ListShells.handle(settings)), () => true)
    })
  }))

/** Provider-neutral definitions (name, description, JSON Schema draft-07 parameters). */
export const toolDefinitions = (): ReadonlyArray<ToolDefinition.ToolDefinition> => ToolDefinition.fromToolkit(toolkit)
