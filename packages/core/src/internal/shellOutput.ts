/**
 * Reading a shell's output for the registry: modes, filters, waits, unread
 * lines and following, and the errors a bad option or pattern gets.
 */
import { StringDecoder } from "node:string_decoder"
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { OutputBuffer } from "../OutputBuffer.js"
import type { OutputChunk } from "../OutputBuffer.js"
import type { ShellInfo } from "../Shell.js"
import type { OutputOptions, OutputResult } from "../ShellRegistry.js"
import * as PatternWorker from "./patternWorker.js"
import type { Shell, Shells, UnknownShell } from "./registryShells.js"
import { infoOf } from "./registryShells.js"

/** The longest `filter` or `waitFor` pattern taken. */
export const MAX_PATTERN_CHARS = 1_000

export class InvalidPattern extends Data.TaggedError("InvalidPattern")<{
  readonly pattern: string
  readonly reason: string
  /**
   * What is wrong: its syntax (the default), its length, what matching it
   * costs (too slow, too deep), or nothing of its own: no thread could run it.
   */
  readonly problem?: "syntax" | "length" | "cost" | "unrunnable" | undefined
  /** The option that gave it. */
  readonly option?: "filter" | "waitFor" | undefined
}> {
  override get message() {
    const shown = JSON.stringify(this.pattern.length > 80 ? `${this.pattern.slice(0, 79)}…` : this.pattern)
    switch (this.problem) {
      case "length":
        return `regular expression ${shown} is ${this.pattern.length} characters long, over the limit of ${MAX_PATTERN_CHARS}: use a shorter one`
      case "cost":
        return `regular expression ${shown} ${this.reason}: simplify it, avoiding nested repetition such as (a+)+ or (.*)*`
      case "unrunnable":
        return `regular expression ${shown} was not run: ${this.reason}`
      default:
        return `invalid regular expression ${shown}: ${this.reason}. Escape special characters such as ( [ { * + ? with a backslash.`
    }
  }
}

export class InvalidOption extends Data.TaggedError("InvalidOption")<{ readonly option: string; readonly value: unknown; readonly expected: string }> {
  override get message() {
    return `invalid ${this.option}: ${JSON.stringify(this.value)}; expected ${this.expected}`
  }
}

export interface Source {
  readonly output: OutputBuffer
  readonly cursors: Map<string, number>
  readonly info: Effect.Effect<ShellInfo>
  /** Completes when the shell has ended. */
  readonly settled: Effect.Effect<void>
  /** Whether the shell has ended already. */
  readonly hasSettled: Effect.Effect<boolean>
}

/**
 * How long a read of a shell that has ended waits for its output to end too.
 * What the dead wrote may still be on its way when their end is known: a
 * namespace's init reports its command's exit before `unshare` exits and the
 * terminal or pipes close, and a `wait_for` then missed a line that arrived
 * a moment later. A process that outlived the shell keeps its pipes open, so
 * the wait is bounded, as the shell's scope bounds its own (see ProcessGroup).
 */
const OUTPUT_AFTER_END_MS = 200

/** The output's end, or `OUTPUT_AFTER_END_MS`, whichever comes first. */
const outputEnded = (output: OutputBuffer) =>
  Effect.flatMap(output.stats, ({ written }) =>
    Effect.asVoid(Effect.timeoutOption(Stream.runDrain(output.follow(written)), Duration.millis(OUTPUT_AFTER_END_MS))))

export const DEFAULT_WAIT_MS = 30_000

export const warm = PatternWorker.warm

type PatternOption = "filter" | "waitFor"

/**
 * Checks a pattern here, where parsing it is cheap and bounded by its length;
 * it is matched only in a pattern worker.
 */
export const checkPattern = (pattern: string, option?: PatternOption) =>
  Effect.suspend(() => {
    if (pattern.length > MAX_PATTERN_CHARS) return new InvalidPattern({ pattern, option, problem: "length", reason: "too long" })
    try {
      new RegExp(pattern)
      return Effect.succeed(pattern)
    } catch (cause) {
      // V8 repeats the pattern in its message: keep only what is wrong with it
      const reason = (cause as Error).message.replace(/^Invalid regular expression: /, "")
      return new InvalidPattern({ pattern, option, reason: reason.startsWith(`/${pattern}/: `) ? reason.slice(pattern.length + 4) : reason })
    }
  })

/** Why a pattern gave no answer, told as what is wrong with it, or as what kept it from being run. */
const unmatched = (pattern: string, option: PatternOption) => (error: PatternWorker.MatchError) => {
  switch (error._tag) {
    case "PatternWorkerUnavailable":
      return new InvalidPattern({ pattern, option, problem: "unrunnable", reason: error.reason })
    case "PatternTimedOut":
      return new InvalidPattern({ pattern, option, problem: "cost", reason: `took more than ${Duration.format(Duration.millis(error.ms))} to match and was stopped` })
    case "PatternFailed":
      return new InvalidPattern({ pattern, option, problem: "cost", reason: `could not be matched (${error.reason})` })
  }
}

const keepMatching = (text: string, filter: string) =>
  Effect.mapError(PatternWorker.keepMatching(filter, text), unmatched(filter, "filter"))

const anyLineMatches = (text: string, pattern: string) =>
  Effect.mapError(PatternWorker.anyLineMatches(pattern, text), unmatched(pattern, "waitFor"))

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
    const filter = options.filter === undefined ? undefined : yield* checkPattern(options.filter, "filter")
    const waitFor = options.waitFor === undefined ? undefined : yield* checkPattern(options.waitFor, "waitFor")
    return { mode, lines, waitMs, filter, waitFor }
  })

/**
 * Waits until a line that arrives after `cursor` matches `pattern`, the shell
 * ends, or `waitMs` passes. What is there already is matched first, in one
 * trip to the worker, then what arrives (OutputBuffer.subscribeFrom: nothing
 * missed or seen twice between the two).
 */
const waitForLine = (source: Source, cursor: number, pattern: string, waitMs: number) =>
  Effect.scoped(Effect.gen(function*() {
    const { live, retained } = yield* source.output.subscribeFrom(cursor)
    const decoder = new StringDecoder("utf8")
    let pending = ""
    const matches = (text: string) => {
      const lines = pending + text
      pending = lines.slice(lines.lastIndexOf("\n") + 1)
      return anyLineMatches(lines, pattern)
    }
    if (yield* matches(decoder.write(Buffer.concat(retained.map((c) => c.bytes))))) return "matched" as const
    const matched = live.pipe(
      Stream.map((chunk) => decoder.write(Buffer.from(chunk.bytes))),
      // what arrived together is matched in one trip to the worker
      Stream.mapChunks((texts) => Chunk.of(Chunk.join(texts, ""))),
      Stream.filterEffect(matches),
      Stream.runHead,
      Effect.map(Option.isSome)
    )
    // the last lines may still be on their way to the matcher: they count too
    const ended = Effect.gen(function*() {
      yield* source.settled
      yield* outputEnded(source.output)
      const all = yield* source.output.readSince(cursor)
      return (yield* anyLineMatches(all.text, pattern)) ? "matched" as const : "exited" as const
    })
    const timeout = Effect.as(Effect.sleep(Duration.millis(waitMs)), "timeout" as const)
    // a pattern too costly to match fails the wait at once, rather than let it run to its timeout
    return yield* Effect.raceFirst(
      Effect.flatMap(matched, (m) => (m ? Effect.succeed("matched" as const) : ended)),
      Effect.race(ended, timeout)
    )
  }))

export const read = (source: Source, options: OutputOptions) =>
  Effect.gen(function*() {
    const { filter, lines, mode, waitFor, waitMs } = yield* validate(options)
    const reader = options.reader ?? "default"
    const cursor = source.cursors.get(reader) ?? 0
    const waited = waitFor === undefined ? undefined : yield* waitForLine(source, cursor, waitFor, waitMs)
    // a shell read as ended is read with all it wrote
    if (waited === undefined && (yield* source.hasSettled)) yield* outputEnded(source.output)
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
      text: filter === undefined ? text : yield* keepMatching(text, filter),
      info: yield* source.info,
      dropped,
      written: stats.written,
      waited
    } satisfies OutputResult
  })

/** Lines in a text, the last counted though it has no newline yet. */
export const lineCount = (text: string): number => {
  let lines = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines++
  return text === "" || text.endsWith("\n") ? lines : lines + 1
}

const sourceOf = (shell: Shell): Source => ({
  output: shell.group.output,
  cursors: shell.cursors,
  info: infoOf(shell),
  settled: Deferred.await(shell.settled),
  hasSettled: Deferred.isDone(shell.settled)
})

/** The registry's reads of its shells' output. */
export const make = (shells: Shells) => ({
  output: (id: string, options: OutputOptions = {}): Effect.Effect<OutputResult, UnknownShell | InvalidPattern | InvalidOption> =>
    Effect.flatMap(shells.lookup(id), (shell) => read(sourceOf(shell), options)),
  unread: (id: string, reader: string): Effect.Effect<number, UnknownShell> =>
    Effect.flatMap(shells.lookup(id), (shell) =>
      Effect.map(shell.group.output.readSince(shell.cursors.get(reader) ?? 0), ({ text }) => lineCount(text))),
  follow: (id: string, options: { readonly retained?: boolean } = {}): Effect.Effect<Stream.Stream<OutputChunk>, UnknownShell> =>
    Effect.flatMap(shells.lookup(id), ({ group: { output } }) =>
      Effect.map(output.stats, ({ written }) => output.follow(options.retained === true ? 0 : written)))
})
