/** Registry and spawn errors as tool errors that tell the model what to do next. */
import type { ProcessGroupError } from "@corral/core/ProcessGroup"
import type { InvalidOption, InvalidPattern, NoStdin, NotOwner, StartError, UnknownShell } from "@corral/core/ShellRegistry"
import { MAX_PATTERN_CHARS } from "@corral/core/ShellRegistry"
import { ToolError } from "../ToolResult.js"

export type RegistryError = StartError | ProcessGroupError | UnknownShell | NotOwner | InvalidPattern | InvalidOption | NoStdin

/** A value the caller gave, quoted and cut to one short line for an error message. */
export const shown = (value: string): string => JSON.stringify(value.length <= 80 ? value : `${value.slice(0, 79)}…`)

export const patternTooLong = (name: string, pattern: string) =>
  `${name} is ${pattern.length} characters long, over the limit of ${MAX_PATTERN_CHARS}: use a shorter regular expression`

/** A pattern named by the parameter that gave it. */
const patternMessage = (error: InvalidPattern): string => {
  const name = error.option === "waitFor" ? "wait_for" : error.option ?? "pattern"
  switch (error.problem) {
    case "length":
      return patternTooLong(name, error.pattern)
    case "cost":
      return `${name} ${shown(error.pattern)} ${error.reason}: simplify it, avoiding nested repetition such as (a+)+ or (.*)*${
        name === "filter" ? ", or read less output with tail_lines" : ""
      }`
    default:
      return error.message
  }
}

export const toToolError = (error: RegistryError): ToolError => {
  switch (error._tag) {
    case "InvalidPattern":
      return new ToolError({ reason: "InvalidInput", message: patternMessage(error) })
    case "EmptyCommand":
    case "InvalidCommand":
    case "InvalidCwd":
    case "InvalidTerminalSize":
    case "InvalidOption":
      return new ToolError({ reason: "InvalidInput", message: error.message })
    case "SpawnError":
      return new ToolError({ reason: "SpawnFailed", message: error.message })
    case "TtyUnavailable":
      return new ToolError({ reason: "SpawnFailed", message: `${error.message}. Tell the user, or run the command without tty: true.` })
    case "TooManyShells": {
      const running = error.running.map((s) => `${s.id} (${s.command.slice(0, 60)})`).join(", ")
      return new ToolError({
        reason: "TooManyShells",
        message: `${error.limit} background shells exist already, the limit: ${running}. Stop one you no longer need with kill_bash, then start again.`
      })
    }
    case "RegistryClosed":
      return new ToolError({ reason: "ShuttingDown", message: "the server is shutting down and starts no new shell" })
    case "UnknownShell":
      return new ToolError({ reason: "UnknownShell", message: `${error.message} list_shells shows the shells there are.` })
    case "NoStdin":
      return new ToolError({
        reason: "InvalidInput",
        message: error.waiting === undefined
          ? `shell ${error.id} takes no more input: its stdin was closed (eof), it has ended, or it was not started by bash in the background. Start the command again with run_in_background: true to write to it.`
          : `shell ${error.id} has not read the ${error.waiting} bytes written to its stdin before: it takes more text once it reads them. See what it is doing with bash_output, or close its stdin with eof: true.`
      })
    case "NotOwner":
      return new ToolError({ reason: "NotOwner", message: `${error.message}; you can only stop the shells you started.` })
  }
}
