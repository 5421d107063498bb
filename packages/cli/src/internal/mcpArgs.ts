/** `corral mcp`'s command line: a few options, no positional words. */
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as CommandShell from "@corral/core/CommandShell"
import * as DurationInput from "@corral/core/DurationInput"
import * as ProcessGroup from "@corral/core/ProcessGroup"
import type * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as ContainmentArg from "./containmentArg.js"
import { options } from "./mcpOptions.js"
import { UsageError } from "./usageError.js"

export interface McpArgs {
  readonly cwd: string
  readonly maxShells?: number | undefined
  readonly grace?: Duration.Duration | undefined
  readonly containment?: ContainmentArg.Choice | undefined
  /** The shell command lines run with; default bash. */
  readonly shell?: string | undefined
  /** What `corral ls` calls this server; default the MCP client's name. */
  readonly name?: string | undefined
}

export type Parsed =
  | { readonly _tag: "Help" }
  | { readonly _tag: "Serve"; readonly args: McpArgs }

const usageError = (message: string) => Either.left(new UsageError({ message }))

const cwdOf = (value: string | undefined): Either.Either<string, UsageError> => {
  const cwd = path.resolve(ProcessGroup.currentDirectory(), value ?? ".")
  const stat = fs.statSync(cwd, { throwIfNoEntry: false })
  if (stat === undefined) {
    return usageError(
      value === undefined
        ? `the current directory (${cwd}) no longer exists: start corral mcp from an existing directory, or pass --cwd DIR`
        : `--cwd ${cwd} does not exist: pass an existing directory`
    )
  }
  if (!stat.isDirectory()) return usageError(`--cwd ${cwd} is not a directory: pass a directory`)
  return Either.right(cwd)
}

const maxShellsOf = (value: string | undefined): Either.Either<number | undefined, UsageError> => {
  if (value === undefined) return Either.right(undefined)
  const n = Number(value)
  return /^\d+$/.test(value) && n > 0
    ? Either.right(n)
    : usageError(`--max-shells needs a whole number of at least 1, like --max-shells 8; got ${JSON.stringify(value)}`)
}

const graceOf = (value: string | undefined): Either.Either<Duration.Duration | undefined, UsageError> =>
  value === undefined
    ? Either.right(undefined)
    : Either.mapLeft(DurationInput.parse(value), (why) => new UsageError({ message: `--grace: ${why}` }))

const shellOf = (value: string | undefined): Either.Either<string | undefined, UsageError> => {
  if (value === undefined) return Either.right(undefined)
  const shell = CommandShell.resolve(value)
  return typeof shell === "string" ? usageError(`--shell: ${shell}`) : Either.right(shell.path)
}

const nameOf = (value: string | undefined): Either.Either<string | undefined, UsageError> =>
  value === undefined || value.trim() !== ""
    ? Either.right(value)
    : usageError(`--name needs a name for corral ls to show, like --name "review agent"; got an empty one`)

const read = (argv: ReadonlyArray<string>) => {
  try {
    return Either.right(parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values)
  } catch (cause) {
    return usageError(`${(cause as Error).message}. corral mcp takes --cwd DIR, --max-shells N, --grace D, --containment C, --shell PATH, --name NAME and --help`)
  }
}

export const parse = (argv: ReadonlyArray<string>): Either.Either<Parsed, UsageError> =>
  Either.gen(function*() {
    const values = yield* read(argv)
    if (values.help === true) return { _tag: "Help" } as const
    return {
      _tag: "Serve",
      args: {
        cwd: yield* cwdOf(values.cwd),
        maxShells: yield* maxShellsOf(values["max-shells"]),
        grace: yield* graceOf(values.grace),
        containment: values.containment === undefined ? undefined : yield* ContainmentArg.parse(values.containment),
        shell: yield* shellOf(values.shell),
        name: yield* nameOf(values.name)
      }
    } as const
  })
