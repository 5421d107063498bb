/**
 * `corral ls`: one table of every background shell on this machine, from
 * every corral supervisor (an MCP server, or any program that composes the
 * registry with its control endpoint).
 */
import { ControlClient, ShellEntry, Snapshot } from "./internal/controlClient.js"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { writeOut } from "./internal/stdio.js"
import * as Table from "./internal/table.js"
import * as TableCommand from "./internal/tableCommand.js"
import { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral ls [--json]

Lists the background shells of every corral supervisor on this machine: its
MCP servers and any program that serves its registry's control endpoint.

  ▶ running   ■ stopping   ✓ exited 0   ■ (dim) killed, as on request
  ✗ any other non-zero exit or error

ID is <supervisor pid>:<shell id>, like 4242:s1: what \`corral show\`, \`logs\`
and \`stop\` take, and the CORRAL_SHELL_ID of every process of the shell. A
shell whose supervisor died shows as orphaned: its supervisor's watcher is
about to stop it, or \`corral stop\` can.

options:
  --json      print the shells and supervisors as JSON
  -h, --help  print this help

Supervisors keep their journals and sockets in CORRAL_STATE_DIR (default
$XDG_STATE_HOME/corral, else ~/.local/state/corral). Without
CORRAL_STATE_DIR, ~/.local/state/corral is read too: an MCP client starts
its servers without XDG_STATE_HOME.
`

/** `--json`: the snapshot, each shell with how long it has run (or ran). */
const LsJson = Schema.Struct({
  supervisors: Snapshot.fields.supervisors,
  shells: Schema.Array(Schema.extend(ShellEntry, Schema.Struct({ elapsedMs: Schema.Number })))
})

const encodeJson = Schema.encodeSync(Schema.parseJson(LsJson, { space: 2 }))

const asJson = (snapshot: Snapshot, now: number) =>
  encodeJson({
    supervisors: snapshot.supervisors,
    shells: snapshot.shells.map((entry) => ({ ...entry, elapsedMs: Table.elapsedMs(entry, now) }))
  }) + "\n"

const asTable = (snapshot: Snapshot, now: number) => {
  const notes = Table.problems(snapshot.supervisors)
  if (snapshot.shells.length === 0) return ["no background shells", ...notes].join("\n") + "\n"
  const color = TableCommand.useColor(1)
  const { header, rows } = Table.render(snapshot.shells, { now, color, columns: TableCommand.terminalColumns() })
  return [header, ...rows, ...notes].join("\n") + "\n"
}

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("ls", argv, { json: { type: "boolean" } })
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    if (positionals.length > 0) return yield* new UsageError({ message: `ls takes no arguments, got ${positionals.join(" ")}` })
    const client = yield* ControlClient
    const snapshot = yield* client.snapshot
    const now = yield* Clock.currentTimeMillis
    writeOut(values.json ? asJson(snapshot, now) : asTable(snapshot, now))
    return 0
  })

/** Runs `corral ls` with the words after `ls`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("ls", program(argv), Layer.empty)
