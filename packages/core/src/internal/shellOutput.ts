import { StringDecoder } from "node:string_decoder"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { OutputBuffer } from "../OutputBuffer.js"
import type { OutputOptions, OutputResult, ShellInfo } from "../ShellRegistry.js"
import { InvalidOption, InvalidPattern } from "../ShellRegistry.js"

export interface Source {
  readonly output: OutputBuffer
  readonly cursors: Map<string, number>
  readonly info: Effect.Effect<ShellInfo>
  /** Completes when the shell has ended. */
  readonly settled: Effect.Effect<void>
}

export const DEFAULT_WAIT_MS = 30_000

export const compile = (pattern: string) =>
  Effect.try({
    try: () => new RegExp(pattern),
    catch: (cause) => new InvalidPattern({ pattern, reason: (cause as Error).message.replace(/^Invalid regular expression: /, "") })
  })

const validate = (options: OutputOptions) =>
  Effect.gen(function*() {
    const mode = options.mode ?? "new"
    if (mode !== "new" && mode !== "tail" && mode !== "all") {
      return yield* new InvalidOption({ option: "mode", value: mode, expected: `"new", "tail" or "all"` })
    }
    const lines = options.lines ?? 50
    if (!Number.isInteger(lines) || lines < 1) {
      return yield* new InvalidOption({ option: "lines", value: options.lines, expected: "an integer of at least 1" })
    }
    const waitMs = options.waitMs ?? DEFAULT_WAIT_MS
    if (!Number.isFinite(waitMs) || waitMs < 0) {
      return yield* new InvalidOption({ option: "waitMs", value: options.waitMs, expected: "a number of milliseconds, 0 or more" })
    }
    const filter = options.filter === undefined ? undefined : yield* compile(options.filter)
    const waitFor = options.waitFor === undefined ? undefined : yield* compile(options.waitFor)
    return { mode, lines, waitMs, filter, waitFor }
  })

const keepMatching = (text: string, filter: RegExp) => {
  const lines = text.split("\n")
  const last = lines.pop()!
  const kept = lines.filter((l) => filter.test(l)).map((l) => l + "\n")
  if (last !== "" && filter.test(last)) kept.push(last)
  return kept.join("")
}

const anyLineMatches = (text: string, pattern: RegExp) => text.split("\n").some((line) => pattern.test(line))

/**
 * Waits until a line that arrives after `cursor` matches `pattern`, the shell
 * ends, or `waitMs` passes. Subscribes before looking at what is already
 * there, so a line printed in between is never missed.
 */
const waitForLine = (source: Source, cursor: number, pattern: RegExp, waitMs: number) =>
  Effect.scoped(Effect.gen(function*() {
    const live = yield* source.output.live
    const already = yield* source.output.readSince(cursor)
    if (anyLineMatches(already.text, pattern)) return "matched" as const
    const decoder = new StringDecoder("utf8")
    let pending = already.text.slice(already.text.lastIndexOf("\n") + 1)
    const matched = live.pipe(
      Stream.filter((chunk) => chunk.offset + chunk.bytes.length > already.cursor),
      Stream.map((chunk) => decoder.write(Buffer.from(chunk.bytes))),
      Stream.filter((text) => {
        const lines = (pending + text).split("\n")
        pending = lines[lines.length - 1]!
        return lines.some((line) => pattern.test(line))
      }),
      Stream.runHead,
      Effect.map(Option.isSome)
    )
    const ended = Effect.as(source.settled, "exited" as const)
    return yield* Effect.raceAll([
      Effect.flatMap(matched, (m) => (m ? Effect.succeed("matched" as const) : ended)),
      ended,
      Effect.as(Effect.sleep(Duration.millis(waitMs)), "timeout" as const)
    ])
  }))

export const read = (source: Source, options: OutputOptions) =>
  Effect.gen(function*() {
    const { filter, lines, mode, waitFor, waitMs } = yield* validate(options)
    const reader = options.reader ?? "default"
    const cursor = source.cursors.get(reader) ?? 0
    const waited = waitFor === undefined ? undefined : yield* waitForLine(source, cursor, waitFor, waitMs)
    const stats = yield* source.output.stats
    let text: string
    let dropped = stats.dropped
    if (mode === "new") {
      const since = yield* source.output.readSince(cursor)
      source.cursors.set(reader, since.cursor)
      text = since.text
      dropped = since.dropped
    } else {
      text = (yield* (mode === "tail" ? source.output.tail(lines) : source.output.readSince(0))).text
    }
    return {
      text: filter === undefined ? text : keepMatching(text, filter),
      info: yield* source.info,
      dropped,
      waited
    } satisfies OutputResult
  })
