/** Registry and spawn errors as tool errors that tell the model what to do next. */
import type { ProcessGroupError } from "@corral/core/ProcessGroup"
import type { InvalidOption, InvalidPattern, NotOwner, StartError, UnknownShell } from "@corral/core/ShellRegistry"
import { ToolError } from "../ToolResult.js"

export type RegistryError = StartError | ProcessGroupError | UnknownShell | NotOwner | InvalidPattern | InvalidOption

export const toToolError = (error: RegistryError): ToolError => {
  switch (error._tag) {
    case "EmptyCommand":
    case "InvalidCommand":
    case "InvalidCwd":
    case "InvalidPattern":
    case "InvalidOption":
      return new ToolError({ reason: "InvalidInput", message: error.message })
    case "SpawnError":
      return new ToolError({ reason: "SpawnFailed", message: error.message })
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
    case "NotOwner":
      return new ToolError({ reason: "NotOwner", message: `${error.message}; you can only stop the shells you started.` })
  }
}
