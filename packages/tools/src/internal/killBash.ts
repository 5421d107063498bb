/** The `kill_bash` tool: stops one of the caller's shells and says how it went. */
import * as DurationInput from "@corral/core/DurationInput"
import { Limits } from "@corral/core/Limits"
import { isActive, ShellRegistry } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { KillBashParams } from "../ShellTools.js"
import type { ToolResult } from "../ToolResult.js"
import { invalidInput } from "../ToolResult.js"
import { toToolError } from "./errors.js"
import * as Format from "./format.js"
import type { Settings } from "./settings.js"

type Params = KillBashParams

export const handle = Effect.fn("ShellTools.kill_bash")(function*(params: Params, settings: Settings) {
  if (params.shell_id.trim() === "") {
    return yield* invalidInput("shell_id is empty: pass the id bash returned when it started the background shell (list_shells shows them)")
  }
  const registry = yield* ShellRegistry
  const { grace } = yield* Limits
  const before = yield* registry.info(params.shell_id).pipe(Effect.mapError(toToolError))
  if (!isActive(before.status)) {
    const now = yield* Clock.currentTimeMillis
    return {
      text: `Shell ${before.id} (${before.command}) had already ended: nothing to stop.\n${Format.statusLine(before, now)}`,
      metadata: { ...Format.shellMetadata(before, now), killed: false }
    } satisfies ToolResult
  }
  const report = yield* registry.kill(before.id, { owner: settings.owner }).pipe(Effect.mapError(toToolError))
  const after = yield* registry.info(before.id).pipe(Effect.mapError(toToolError))
  const now = yield* Clock.currentTimeMillis
  const stopped = report.members === 0
    ? "it had nothing left running"
    : `stopped ${Format.count(report.members, "process")} in ${Format.duration(report.durationMs)}: ${
      Format.stopText(report, DurationInput.format(grace))
    }`
  return {
    text: [
      `Killed shell ${before.id} (${before.command}): ${stopped}.`,
      `Its output stays readable with bash_output {"shell_id": "${before.id}"}.`,
      Format.statusLine(after, now)
    ].join("\n"),
    metadata: { ...Format.shellMetadata(after, now), killed: true, stop: Format.stopMetadata(report) }
  } satisfies ToolResult
})
