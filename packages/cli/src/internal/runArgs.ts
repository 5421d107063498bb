/**
 * `corral run`'s command line. Options end at the first word that is not
 * one, or at `--`; everything after is CMD and its arguments, untouched, so
 * `corral run ls -la` needs no `--`.
 */
import { parseArgs } from "node:util"
import * as DurationInput from "@corral/core/DurationInput"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ContainmentArg from "./containmentArg.js"
import { UsageError } from "./usageError.js"

export interface RunArgs {
  readonly command: ReadonlyArray<string>
  /** None: no time limit. */
  readonly timeout: Option.Option<Duration.Duration>
  /** None: Limits' grace (3 s, or `CORRAL_GRACE`). */
  readonly grace: Option.Option<Duration.Duration>
  readonly verbose: boolean
  /** None: `CORRAL_CONTAINMENT`, else auto. */
  readonly containment: Option.Option<ContainmentArg.Choice>
}

export type Parsed =
  | { readonly _tag: "Help" }
  | { readonly _tag: "Run"; readonly args: RunArgs }

const options = {
  timeout: { type: "string" },
  grace: { type: "string" },
  containment: { type: "string" },
  verbose: { type: "boolean", short: "v" },
  help: { type: "boolean", short: "h" }
} as const

interface OptionToken {
  readonly name: string
  readonly rawName: string
  readonly value?: string | undefined
  readonly inlineValue?: boolean | undefined
}

const usageError = (message: string) => Either.left(new UsageError({ message }))

const durationOf = (token: OptionToken): Either.Either<Duration.Duration, UsageError> => {
  // parseArgs takes the next word as the value even when it is `--` or another option
  if (token.value === undefined || (!token.inlineValue && token.value.startsWith("-"))) {
    return usageError(`${token.rawName} needs a duration, like ${token.rawName} 30s`)
  }
  return Either.mapLeft(DurationInput.parse(token.value), (why) => new UsageError({ message: `${token.rawName}: ${why}` }))
}

const flagOf = (token: OptionToken): Either.Either<true, UsageError> =>
  token.value === undefined ? Either.right(true) : usageError(`${token.rawName} takes no value`)

const unknownOption = (token: OptionToken) =>
  usageError(
    `unknown option ${token.rawName} for run: it takes --timeout, --grace, --containment, --verbose and --help before the command; ` +
      `put -- before a command that starts with a dash`
  )

interface Values {
  readonly timeout: Option.Option<Duration.Duration>
  readonly grace: Option.Option<Duration.Duration>
  readonly verbose: boolean
  readonly containment: Option.Option<ContainmentArg.Choice>
  readonly help: boolean
}

const apply = (values: Values, token: OptionToken): Either.Either<Values, UsageError> => {
  switch (token.name) {
    case "timeout":
      return Either.map(durationOf(token), (d) => ({ ...values, timeout: Option.some(d) }))
    case "grace":
      return Either.map(durationOf(token), (d) => ({ ...values, grace: Option.some(d) }))
    case "containment":
      return Either.map(ContainmentArg.parse(token.value), (c) => ({ ...values, containment: Option.some(c) }))
    case "verbose":
      return Either.map(flagOf(token), () => ({ ...values, verbose: true }))
    case "help":
      return Either.map(flagOf(token), () => ({ ...values, help: true }))
    default:
      return unknownOption(token)
  }
}

export const parse = (argv: ReadonlyArray<string>): Either.Either<Parsed, UsageError> => {
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true })
  let values: Values = { timeout: Option.none(), grace: Option.none(), verbose: false, containment: Option.none(), help: false }
  let commandAt = argv.length
  for (const token of tokens) {
    if (token.kind !== "option") {
      commandAt = token.kind === "option-terminator" ? token.index + 1 : token.index
      break
    }
    const next = apply(values, token)
    if (Either.isLeft(next)) return Either.left(next.left)
    values = next.right
  }
  if (values.help) return Either.right({ _tag: "Help" })
  const command = argv.slice(commandAt)
  if (command.length === 0) {
    return usageError("no command to run: put it after the options, like `corral run --timeout 30s -- npm test`")
  }
  // timeout(1) reads a zero duration as "no limit"
  const timeout = Option.filter(values.timeout, (d) => Duration.toMillis(d) > 0)
  return Either.right({ _tag: "Run", args: { command, timeout, grace: values.grace, verbose: values.verbose, containment: values.containment } })
}
