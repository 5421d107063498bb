/**
 * `corral stop ID` and `corral stop --all`: the stop goes through the shell's
 * supervisor, with its policy (SIGTERM, grace, SIGKILL) and its report. An
 * orphan, whose supervisor died, is stopped here, once its pid, process group
 * and start time are checked to still be the ones its journal recorded.
 */
import type { Stopped } from "./internal/controlClient.js"
import { ControlClient } from "./internal/controlClient.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { printError, writeOut } from "./internal/stdio.js"
import * as StopReport from "./internal/stopReport.js"
import * as Table from "./internal/table.js"
import * as TableCommand from "./internal/tableCommand.js"
import { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral stop ID
       corral stop --all

Stops a background shell and everything it started: its supervisor sends
SIGTERM to the shell's process groups, waits the grace period, then sends
SIGKILL, and reports how it went. ID is <supervisor pid>:<shell id> as
\`corral ls\` prints it, like 4242:s1. Any agent's shell can be stopped: the
person at the machine decides. A shell whose supervisor died (orphaned) is
stopped by corral itself, only if its pid, process group and start time
still match what the supervisor recorded.

options:
  --all       stop every running shell of every supervisor on this machine
  -h, --help  print this help

exit status: 0 stopped (or had already ended), 1 failed, 2 bad usage
`

const describe = (stopped: Stopped) => {
  const { entry } = stopped
  const what = `${entry.id} (${entry.reach === "orphaned" ? "orphaned, " : ""}${Table.truncate(Table.oneLine(entry.info.command), 60)})`
  return stopped.wasActive
    ? `${what}: ${StopReport.format(stopped.report)}`
    : `${what} had already ended: ${Table.lookOf(entry).label}`
}

const stopOne = (id: string) =>
  Effect.gen(function*() {
    const stopped = yield* (yield* ControlClient).stop(id)
    writeOut(describe(stopped) + "\n")
    return 0
  })

const stopAll = Effect.gen(function*() {
  const { stopped, unreachable } = yield* (yield* ControlClient).stopAll
  writeOut(stopped.length === 0 ? "no running shells\n" : stopped.map((s) => describe(s) + "\n").join(""))
  for (const problem of Table.problems(unreachable)) printError(`${problem}: its shells were not stopped`)
  return unreachable.length === 0 ? 0 : TableCommand.Failed
})

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("stop", argv, { all: { type: "boolean" } })
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    if (!values.all) return yield* stopOne(yield* TableCommand.oneId("stop", positionals))
    if (positionals.length > 0) {
      return yield* new UsageError({ message: `stop --all takes no shell id, got ${positionals.join(" ")}: use one or the other` })
    }
    return yield* stopAll
  })

/** Runs `corral stop` with the words after `stop`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("stop", program(argv), Layer.empty)
