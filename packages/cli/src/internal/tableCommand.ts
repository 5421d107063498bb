/**
 * What the commands over the machine's table of shells (`corral ls`, `show`,
 * `logs`, `stop`, `top`) share: their command line, the `ControlClient`, and
 * how a failure ends them. Exit status: 0 done, 1 failed (no such shell, no
 * supervisor), 125 bad usage, as every corral command (one line on stderr).
 */
import * as tty from "node:tty"
import { parseArgs } from "node:util"
import type { ParseArgsConfig } from "node:util"
import type { FindError } from "./controlClient.js"
import { ControlClient } from "./controlClient.js"
import * as Cause from "effect/Cause"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as ExitCode from "./exitCode.js"
import * as StderrLogger from "./stderrLogger.js"
import { printError, printFailure } from "./stdio.js"
import { UsageError } from "./usageError.js"

export const Failed = 1
export const BadUsage = ExitCode.Failed

export interface Parsed {
  readonly values: Readonly<Record<string, string | boolean | undefined>>
  readonly positionals: ReadonlyArray<string>
}

const usageErrorOf = (command: string, options: NonNullable<ParseArgsConfig["options"]>, error: NodeJS.ErrnoException) => {
  if (error.code !== "ERR_PARSE_ARGS_UNKNOWN_OPTION") return new UsageError({ message: `${command}: ${error.message}` })
  const option = /'([^']+)'/.exec(error.message)?.[1] ?? "?"
  const known = [...Object.keys(options).map((name) => `--${name}`), "--help"].join(", ")
  return new UsageError({ message: `unknown option ${option} for ${command}: it takes ${known}` })
}

/** Options anywhere, `--help` included; the rest are positionals. */
export const parse = (
  command: string,
  argv: ReadonlyArray<string>,
  options: NonNullable<ParseArgsConfig["options"]>
): Either.Either<Parsed, UsageError> =>
  Either.try({
    try: () => parseArgs({ args: [...argv], options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true }),
    catch: (error) => usageErrorOf(command, options, error as NodeJS.ErrnoException)
  })

/** Colour only for a terminal, and never when NO_COLOR is set (https://no-color.org). */
export const useColor = (fd: number) => tty.isatty(fd) && (process.env.NO_COLOR ?? "") === ""

/** The terminal's width, or none when stdout is not a terminal: piped output is never cut. */
export const terminalColumns = (): number | undefined => (tty.isatty(1) ? process.stdout.columns : undefined)

export type CommandError = UsageError | FindError | ConfigError.ConfigError | { readonly _tag: string; readonly message: string }

const exitCodeOf = (error: CommandError) =>
  error._tag === "UsageError" || error._tag === "InvalidShellId" ? BadUsage : Failed

/**
 * Runs a command to its exit status, which it sets on the process. A usage
 * error also points at the command's help.
 */
export const run = <E extends CommandError, R>(
  command: string,
  program: Effect.Effect<number, E, R | ControlClient>,
  layer: Layer.Layer<R, ConfigError.ConfigError | E>
): void => {
  const handled = program.pipe(
    Effect.provide(layer),
    Effect.provide(ControlClient.layerConfig()),
    Effect.catchAll((error: CommandError) =>
      Effect.sync(() => {
        printError(error._tag === "UsageError" ? `${error.message}; \`corral ${command} --help\` gives its usage` : error.message)
        return exitCodeOf(error)
      })
    ),
    Effect.provide(StderrLogger.layer)
  )
  void Effect.runPromiseExit(handled).then((exit) => {
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) printFailure(exit.cause)
    process.exitCode = Exit.isSuccess(exit) ? exit.value : Failed
  })
}

/** The one shell id a command takes. */
export const oneId = (command: string, positionals: ReadonlyArray<string>) =>
  positionals.length === 1
    ? Either.right(positionals[0]!)
    : Either.left(new UsageError({
      message: positionals.length === 0
        ? `${command} needs the id of a shell, like 4242:s1: \`corral ls\` lists them`
        : `${command} takes one shell id, got ${positionals.length}: ${positionals.join(" ")}`
    }))
