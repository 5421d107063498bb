/** The `list_shells` tool: one aligned line per shell. */
import { isActive, ShellRegistry } from "@corral/core/ShellRegistry"
import type { ShellInfo } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { ToolResult } from "../ToolResult.js"
import * as Format from "./format.js"
import type { Settings } from "./settings.js"

const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n")
}

const row = (info: ShellInfo, now: number, settings: Settings) => [
  info.id,
  Format.statusText(info.status),
  Format.duration(Format.elapsedMs(info, now)),
  info.owner === settings.owner ? info.command : `${info.command}  (started by ${info.owner})`
]

export const handle = Effect.fn("ShellTools.list_shells")(function*(settings: Settings) {
  const registry = yield* ShellRegistry
  const shells = yield* registry.list
  const now = yield* Clock.currentTimeMillis
  if (shells.length === 0) {
    return {
      text: "No background shells. Start one with bash run_in_background: true.",
      metadata: { shells: [] }
    } satisfies ToolResult
  }
  const running = shells.filter((s) => isActive(s.status)).length
  return {
    text: [
      `${Format.count(shells.length, "shell", "shells")}, ${running} running:`,
      table([["id", "status", "time", "command"], ...shells.map((s) => row(s, now, settings))])
    ].join("\n"),
    metadata: { shells: shells.map((s) => Format.shellMetadata(s, now)) }
  } satisfies ToolResult
})
