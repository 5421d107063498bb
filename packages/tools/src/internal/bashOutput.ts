/** The `bash_output` tool: new output (or the tail), filtered, optionally after a wait, with the shell's status. */
import { Limits } from "@corral/core/Limits"
import type { OutputResult } from "@corral/core/ShellRegistry"
import { MAX_PATTERN_CHARS, ShellRegistry } from "@corral/core/ShellRegistry"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { BashOutputParams } from "../ShellTools.js"
import type { ToolResult } from "../ToolResult.js"
import { invalidInput } from "../ToolResult.js"
import { DEFAULT_WAIT_MS, MAX_TAIL_LINES, MAX_WAIT_MS } from "./bounds.js"
import { cap } from "./cap.js"
import { patternTooLong, shown, toToolError } from "./errors.js"
import * as Format from "./format.js"
import { screenText } from "../ScreenText.js"
import type { Settings } from "./settings.js"

type Params = BashOutputParams

const checkPattern = (name: string, pattern: string | undefined) =>
  Effect.suspend(() => {
    if (pattern === undefined) return Effect.void
    if (pattern.length > MAX_PATTERN_CHARS) {
      return invalidInput(patternTooLong(name, pattern))
    }
    try {
      new RegExp(pattern)
      return Effect.void
    } catch (cause) {
      // V8 quotes the pattern as /pattern/: for a long one, the error names it once, cut short
      const reason = (cause as Error).message.replace(/^Invalid regular expression: /, "")
      const detail = pattern.length <= 80 || !reason.startsWith(`/${pattern}/: `) ? reason : reason.slice(pattern.length + 4)
      return invalidInput(
        `${name} ${shown(pattern)} is not a valid regular expression (${detail}): escape special characters such as ( [ { * + ? with a backslash to match them literally`
      )
    }
  })

const validate = (params: Params) =>
  Effect.gen(function*() {
    const id = params.shell_id ?? params.bash_id
    if (id === undefined || id.trim() === "") {
      return yield* invalidInput("shell_id is missing: pass the id bash returned when it started the background shell (list_shells shows them)")
    }
    if (params.bash_id !== undefined && params.shell_id !== undefined && params.bash_id !== params.shell_id) {
      return yield* invalidInput(`shell_id ${shown(params.shell_id)} and bash_id ${shown(params.bash_id)} differ: pass only shell_id`)
    }
    const lines = params.tail_lines
    if (lines !== undefined && (!Number.isInteger(lines) || lines < 1)) {
      return yield* invalidInput(
        `tail_lines must be a whole number, at least 1; got ${lines}. Leave it out to read what is new since your last read.`
      )
    }
    if (lines !== undefined && lines > MAX_TAIL_LINES) {
      return yield* invalidInput(
        `tail_lines ${lines} is over the maximum of ${MAX_TAIL_LINES}: a result carries 30000 characters at most, so ask for fewer lines, or narrow them with filter`
      )
    }
    const waitMs = params.wait_timeout ?? DEFAULT_WAIT_MS
    if (!Number.isInteger(waitMs) || waitMs < 0) {
      return yield* invalidInput(`wait_timeout must be a whole number of milliseconds, 0 or more; got ${params.wait_timeout}`)
    }
    if (waitMs > MAX_WAIT_MS) {
      return yield* invalidInput(
        `wait_timeout ${waitMs} ms is over the maximum of ${MAX_WAIT_MS} ms (10 minutes): wait that long at most, then call bash_output again`
      )
    }
    yield* checkPattern("filter", params.filter)
    yield* checkPattern("wait_for", params.wait_for)
    return { id, lines, waitMs }
  })

const waitedText = (result: OutputResult, pattern: string, waitedMs: number): string => {
  const after = Format.duration(waitedMs)
  switch (result.waited) {
    case "matched":
      return `[wait_for /${pattern}/: a new line matched after ${after}]`
    case "exited":
      return `[wait_for /${pattern}/: the shell ended after ${after}, and no new line matched]`
    default:
      return result.written === 0
        ? `[wait_for /${pattern}/: no new line matched within ${after}, and the shell has printed nothing at all since it started. It is still running; the program may be buffering its output because stdout is a pipe, not a terminal: make it flush (python -u, stdbuf -oL CMD, a flush after each print), then start it again and wait again.]`
        : `[wait_for /${pattern}/: no new line matched within ${after}; the shell is still running. Read the output above to see what it is doing, then wait again or stop it.]`
  }
}

const emptyText = (params: Params) =>
  params.filter !== undefined ? "(no matching lines)" : params.tail_lines !== undefined ? "(no output)" : "(no new output)"

export const handle = Effect.fn("ShellTools.bash_output")(function*(params: Params, settings: Settings) {
  const { id, lines, waitMs } = yield* validate(params)
  const registry = yield* ShellRegistry
  const limits = yield* Limits
  // timed by the monotonic clock: a wall clock stepped meanwhile does not change how long the wait was
  const [waited, result] = yield* Effect.timed(registry.output(id, {
    mode: lines === undefined ? "new" : "tail",
    lines,
    filter: params.filter,
    waitFor: params.wait_for,
    waitMs,
    reader: settings.reader
  }).pipe(Effect.mapError(toToolError)))
  const waitedMs = Math.round(Duration.toMillis(waited))
  const now = yield* Clock.currentTimeMillis
  const output = cap(screenText(result.text, result.info.tty), "narrow it with filter or tail_lines")
  const body = result.text === "" ? emptyText(params) : output.text.replace(/\n$/, "")
  const notes = [
    ...(params.wait_for === undefined ? [] : [waitedText(result, params.wait_for, waitedMs)]),
    ...(params.wait_for === undefined && params.wait_timeout !== undefined ? ["[wait_timeout applies only with wait_for, and was ignored]"] : []),
    ...(result.dropped > 0 ? [Format.droppedNote(result.dropped, limits.bufferBytes, "Read more often, or use filter.")] : []),
    Format.statusLine(result.info, now)
  ]
  return {
    text: [body, ...notes].join("\n"),
    metadata: {
      ...Format.shellMetadata(result.info, now),
      dropped_bytes: result.dropped,
      waited: result.waited,
      waited_ms: params.wait_for === undefined ? undefined : waitedMs,
      output_chars: output.total,
      cut_chars: output.cut
    }
  } satisfies ToolResult
})
