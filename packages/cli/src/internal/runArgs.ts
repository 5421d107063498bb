/**
 * `corral run`'s command line, read as GNU timeout(1) reads its own:
 * `corral run [OPTION]... [DURATION] CMD [ARG]...`. Options end at the first
 * word that is not one, or at `--`. Short options cluster (`-vk5`), long ones
 * take `=VALUE` or the next word and may be shortened to a unique prefix
 * (`--pres`). Then, unless `--timeout` was given, a first word that reads as
 * a duration is DURATION; everything after is CMD and its arguments,
 * untouched, so `corral run ls -la` needs no `--`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ContainmentArg from "./containmentArg.js"
import * as GnuDuration from "./gnuDuration.js"
import * as Signals from "./signals.js"
import { UsageError } from "./usageError.js"

export interface RunArgs {
  readonly command: ReadonlyArray<string>
  /** None: no time limit. `Duration.infinity`: a limit so far off it never comes. */
  readonly timeout: Option.Option<Duration.Duration>
  /** None: Limits' grace (3 s, or `CORRAL_GRACE`). Given, it also bounds the wait after a signal passed on, as `timeout -k`. */
  readonly grace: Option.Option<Duration.Duration>
  /** The signal number sent on timeout (`-s`); SIGTERM by default. */
  readonly signal: number
  /** Exit with CMD's status even after a timeout. */
  readonly preserveStatus: boolean
  /** CMD stays in corral's group (the terminal's foreground job); only CMD is signalled, as `timeout --foreground`. */
  readonly foreground: boolean
  readonly verbose: boolean
  /** None: `CORRAL_CONTAINMENT`, else auto. */
  readonly containment: Option.Option<ContainmentArg.Choice>
}

export type Parsed =
  | { readonly _tag: "Help" }
  | { readonly _tag: "Run"; readonly args: RunArgs }

type Name = "timeout" | "kill-after" | "grace" | "signal" | "preserve-status" | "foreground" | "containment" | "verbose" | "help"

interface Spec {
  readonly name: Name
  readonly short?: string
  /** What the value is, for messages; absent for a flag. */
  readonly value?: string
}

const specs: ReadonlyArray<Spec> = [
  { name: "timeout", value: "duration, like --timeout 30s" },
  { name: "kill-after", short: "k", value: "duration, like -k 5s" },
  { name: "grace", value: "duration, like --grace 5s" },
  { name: "signal", short: "s", value: "signal, like -s INT" },
  { name: "preserve-status", short: "p" },
  { name: "foreground" },
  { name: "containment", value: "backend, like --containment procScan" },
  { name: "verbose", short: "v" },
  { name: "help", short: "h" }
]

/** An option as given on the command line. */
interface Given {
  readonly spec: Spec
  /** As typed: `-k`, `--kill-after`, `--kill`. */
  readonly rawName: string
  readonly value: string | undefined
}

const usageError = (message: string) => Either.left(new UsageError({ message }))

const unknownOption = (rawName: string) =>
  usageError(
    `unknown option ${rawName} for run: it takes -s SIG, -k D, -p (--preserve-status), --foreground, --timeout D, --grace D, ` +
      `--containment C, -v and -h before the command; put -- before a command that starts with a dash`
  )

/** A long option by its full name or, as getopt_long allows, a prefix of only one. */
const longSpec = (given: string): Either.Either<Spec, UsageError> => {
  const exact = specs.find((s) => s.name === given)
  if (exact !== undefined) return Either.right(exact)
  const candidates = given === "" ? [] : specs.filter((s) => s.name.startsWith(given))
  if (candidates.length === 1) return Either.right(candidates[0]!)
  if (candidates.length === 0) return unknownOption(`--${given}`)
  return usageError(`option --${given} is ambiguous for run: it could be ${candidates.map((s) => `--${s.name}`).join(" or ")}; spell it out`)
}

/** The options and where the operands start. */
const tokenize = (argv: ReadonlyArray<string>): Either.Either<{ options: Array<Given>; operandsAt: number }, UsageError> => {
  const options: Array<Given> = []
  let i = 0
  for (; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") return Either.right({ options, operandsAt: i + 1 })
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=")
      const spec = longSpec(arg.slice(2, eq < 0 ? undefined : eq))
      if (Either.isLeft(spec)) return Either.left(spec.left)
      const rawName = `--${spec.right.name}`
      if (spec.right.value === undefined && eq >= 0) return usageError(`${rawName} takes no value`)
      const value = spec.right.value === undefined ? undefined : eq >= 0 ? arg.slice(eq + 1) : separate(argv, ++i)
      options.push({ spec: spec.right, rawName, value })
    } else if (arg.startsWith("-") && arg !== "-") {
      for (let j = 1; j < arg.length; j++) {
        const spec = specs.find((s) => s.short === arg[j])
        if (spec === undefined) return unknownOption(`-${arg[j]}`)
        const inline = arg.slice(j + 1)
        if (spec.value === undefined) {
          options.push({ spec, rawName: `-${arg[j]}`, value: undefined })
          continue
        }
        options.push({ spec, rawName: `-${arg[j]}`, value: inline !== "" ? inline : separate(argv, ++i) })
        break
      }
    } else break
  }
  return Either.right({ options, operandsAt: i })
}

// a value in a word of its own must not be the next option, or `--`: `--timeout -- cmd` lacks the duration
const separate = (argv: ReadonlyArray<string>, i: number) => {
  const word = argv[i]
  return word === undefined || word === "--" || (word.startsWith("-") && !/^-\d/.test(word)) ? undefined : word
}

interface Values {
  /** Whether --timeout was given, and then what it says (None: no limit). */
  readonly timeout: Option.Option<Option.Option<Duration.Duration>>
  readonly grace: Option.Option<Duration.Duration>
  readonly signal: number
  readonly preserveStatus: boolean
  readonly foreground: boolean
  readonly verbose: boolean
  readonly containment: Option.Option<ContainmentArg.Choice>
  readonly help: boolean
}

const durationOf = (option: Given, value: string) =>
  Either.mapLeft(GnuDuration.parseSeconds(value), (why) => new UsageError({ message: `${option.rawName}: ${why}` }))

const apply = (values: Values, option: Given): Either.Either<Values, UsageError> => {
  const { spec, rawName, value } = option
  if (spec.value !== undefined && value === undefined) return usageError(`${rawName} needs a ${spec.value}`)
  switch (spec.name) {
    case "timeout":
      return Either.map(durationOf(option, value!), (s) => ({ ...values, timeout: Option.some(GnuDuration.toDuration(s)) }))
    // as timeout(1): -k 0 is no -k at all; --grace 0 is no grace
    case "kill-after":
      return Either.map(durationOf(option, value!), (s) => ({ ...values, grace: s === 0 ? values.grace : GnuDuration.toDuration(s) }))
    case "grace":
      return Either.map(durationOf(option, value!), (s) => ({
        ...values,
        grace: Option.some(Option.getOrElse(GnuDuration.toDuration(s), () => Duration.zero))
      }))
    case "signal": {
      const signal = Signals.parse(value!)
      return signal === undefined
        ? usageError(`${rawName}: invalid signal ${JSON.stringify(value)}: use a name like TERM, INT or KILL (with or without SIG), or a number; see kill -l`)
        : Either.right({ ...values, signal })
    }
    case "containment":
      return Either.map(ContainmentArg.parse(value), (c) => ({ ...values, containment: Option.some(c) }))
    case "preserve-status":
      return Either.right({ ...values, preserveStatus: true })
    case "foreground":
      return Either.right({ ...values, foreground: true })
    case "verbose":
      return Either.right({ ...values, verbose: true })
    case "help":
      return Either.right({ ...values, help: true })
  }
}

/** Whether `word` names a program that could be run: a file at that path, or of that name on PATH. */
export const isCommand = (word: string): boolean => {
  const candidates = word.includes("/")
    ? [word]
    : (process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(":").map((dir) => path.join(dir || ".", word))
  return candidates.some((candidate) => {
    try {
      return fs.statSync(candidate, { throwIfNoEntry: false })?.isFile() === true
    } catch {
      // a PATH entry this user may not search holds no command for them
      return false
    }
  })
}

/**
 * DURATION, when the first operand is one. A first operand that is neither
 * a duration nor a program is a bad DURATION, as timeout(1) says, when it
 * starts like a number (`10x`) or a program follows it (`soon make`);
 * otherwise it is a command, missing (127). A program named like a number
 * (`7z`) runs: corral runs commands without a DURATION.
 */
const leadingDuration = (
  operands: ReadonlyArray<string>,
  isCommand: (word: string) => boolean
): Either.Either<Option.Option<Option.Option<Duration.Duration>>, UsageError> => {
  const [word, next] = operands
  if (word === undefined) return Either.right(Option.none())
  const seconds = GnuDuration.parseSeconds(word)
  if (Either.isRight(seconds)) return Either.right(Option.some(GnuDuration.toDuration(seconds.right)))
  const meantAsDuration = /^[ \t]*[+-]?\.?\d/.test(word) || (next !== undefined && isCommand(next))
  if (meantAsDuration && !isCommand(word)) {
    return Either.left(new UsageError({ message: `${seconds.left}; no command is named "${word}" either` }))
  }
  return Either.right(Option.none())
}

export const parse = (argv: ReadonlyArray<string>, commandExists: (word: string) => boolean = isCommand): Either.Either<Parsed, UsageError> =>
  Either.gen(function*() {
    const { operandsAt, options } = yield* tokenize(argv)
    let values: Values = {
      timeout: Option.none(),
      grace: Option.none(),
      signal: 15,
      preserveStatus: false,
      foreground: false,
      verbose: false,
      containment: Option.none(),
      help: false
    }
    for (const option of options) values = yield* apply(values, option)
    if (values.help) return { _tag: "Help" } as const
    let commandAt = operandsAt
    let timeout = Option.flatten(values.timeout)
    if (Option.isNone(values.timeout)) {
      const leading = yield* leadingDuration(argv.slice(operandsAt, operandsAt + 2), commandExists)
      if (Option.isSome(leading)) [timeout, commandAt] = [leading.value, operandsAt + 1]
    }
    const command = argv.slice(commandAt)
    if (command.length === 0) {
      return yield* usageError("no command to run: put it after the options, like `corral run 30s npm test` or `corral run --timeout 30s -- npm test`")
    }
    if (values.foreground && Option.isSome(values.containment)) {
      return yield* usageError("--foreground keeps CMD in corral's own group, which no containment holds: drop --containment, or --foreground")
    }
    const { grace, signal, preserveStatus, foreground, verbose, containment } = values
    return { _tag: "Run", args: { command, timeout, grace, signal, preserveStatus, foreground, verbose, containment } } as const
  })
