/**
 * The `write_stdin` tool: text to a background shell's stdin, or a control
 * key as a terminal would deliver it (`ShellInput`: typed into the shell's
 * terminal if it has one; on a pipe, Ctrl-C becomes SIGINT to its group and
 * Ctrl-D closes stdin), then what the shell printed within a short wait.
 */
import * as ShellInput from "@corral/core/ShellInput"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { WriteStdinParams } from "../ShellTools.js"
import type { ToolResult } from "../ToolResult.js"
import { invalidInput } from "../ToolResult.js"
import { DEFAULT_INPUT_WAIT_MS, MAX_INPUT_WAIT_MS } from "./bounds.js"
import { cap } from "./cap.js"
import { toToolError } from "./errors.js"
import * as Format from "./format.js"
import { screenText } from "../ScreenText.js"
import type { Settings } from "./settings.js"

const validate = (params: WriteStdinParams) =>
  Effect.gen(function*() {
    if (params.shell_id.trim() === "") {
      return yield* invalidInput("shell_id is empty: pass the id bash returned when it started the background shell (list_shells shows them)")
    }
    if ((params.text === undefined || params.text === "") && params.eof !== true) {
      return yield* invalidInput(`give text to write (such as "yes\\n", or "\\u0003" for Ctrl-C), or eof: true to close stdin`)
    }
    const waitMs = params.wait_ms ?? DEFAULT_INPUT_WAIT_MS
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_INPUT_WAIT_MS) {
      return yield* invalidInput(
        `wait_ms must be a whole number of milliseconds from 0 to ${MAX_INPUT_WAIT_MS}; got ${params.wait_ms}. To wait longer for a line, use bash_output wait_for.`
      )
    }
    return waitMs
  })

/** What was done, as the first line of the result says it. */
const didText = (id: string, text: string, delivered: ShellInput.Delivered): string => {
  if (delivered._tag === "Signaled") return `sent ${delivered.signal} to shell ${id}'s process group (${delivered.key})`
  const key = ShellInput.keyName(text)
  if (delivered.tty) {
    const typed = key !== undefined ? [`typed ${key} into shell ${id}'s terminal`] : text === "" ? [] : [`typed ${Format.count(text.length, "character", "characters")} into shell ${id}'s terminal`]
    return [...typed, ...(delivered.eof ? [`Ctrl-D (end of file at the start of a line)`] : [])].join(", then ")
  }
  const wrote = delivered.chars === 0 ? [] : [`wrote ${Format.count(delivered.chars, "character", "characters")} to shell ${id}'s stdin`]
  const did = [...wrote, ...(delivered.eof ? [`closed shell ${id}'s stdin (end of file)`] : [])].join(", then ")
  return delivered.waiting === true ? `${did}; the command has not read all of it yet: the rest waits in the pipe and goes to it, in order, as it reads` : did
}

export const handle = Effect.fn("ShellTools.write_stdin")(function*(params: WriteStdinParams, settings: Settings) {
  const waitMs = yield* validate(params)
  const registry = yield* ShellRegistry
  const owner = { owner: settings.owner }
  const id = params.shell_id
  const began = yield* Clock.currentTimeMillis
  // a command that does not read its input holds the call no longer than the wait for its output
  const delivered = yield* ShellInput.send(id, { text: params.text, eof: params.eof }, { ...owner, within: Duration.millis(waitMs) }).pipe(
    Effect.mapError(toToolError)
  )
  const did = didText(id, params.text ?? "", delivered)
  yield* Effect.sleep(Duration.millis(Math.max(0, waitMs - ((yield* Clock.currentTimeMillis) - began))))
  const read = yield* registry.output(id, { mode: "new", reader: settings.reader }).pipe(Effect.mapError(toToolError))
  const now = yield* Clock.currentTimeMillis
  const output = cap(screenText(read.text, read.info.tty), "read it in parts with bash_output tail_lines or filter")
  return {
    text: [
      `[${did}]`,
      read.text === "" ? `(no new output within ${Format.duration(waitMs)})` : output.text.replace(/\n$/, ""),
      Format.statusLine(read.info, now)
    ].join("\n"),
    metadata: { ...Format.shellMetadata(read.info, now), output_chars: output.total, cut_chars: output.cut }
  } satisfies ToolResult
})
