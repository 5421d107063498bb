/** `corral show ID`: one background shell's status and its retained output. */
import type { Shown } from "./internal/controlClient.js"
import { ControlClient } from "./internal/controlClient.js"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { write, writeOut } from "./internal/stdio.js"
import * as Table from "./internal/table.js"
import * as TableCommand from "./internal/tableCommand.js"

export const usage = `usage: corral show ID

Prints the status of a background shell, then the output its supervisor
retained: the newest bytes, up to the supervisor's CORRAL_BUFFER_BYTES.
ID is <supervisor pid>:<shell id> as \`corral ls\` prints it, like 4242:s1.

options:
  -h, --help  print this help
`

const containmentText = {
  cgroup: "by a cgroup of its own: nothing it starts can leave",
  pidns: "by a PID namespace of its own: nothing it starts can leave",
  procScan: "by process scan: its group, session, tag and descendants"
} as const

const timestamp = (ms: number) => new Date(ms).toISOString()

const format = ({ entry, output }: Shown, now: number, color: boolean) => {
  const look = Table.lookOf(entry)
  const { info } = entry
  const fields: ReadonlyArray<readonly [string, string | undefined]> = [
    // an agent's words, each shown whole: a command, a name or a directory can hold what a terminal acts on
    ["command", Table.visible(info.command)],
    ["name", info.name === undefined ? undefined : Table.visible(info.name)],
    ["supervisor", Table.supervisorLabel(entry)],
    ["owner", Table.visible(info.owner)],
    ["cwd", Table.visible(info.cwd)],
    ["pid", `${info.pid} (leads the shell's process group and session)`],
    ["contained", info.containment === undefined ? undefined : containmentText[info.containment]],
    ["terminal", info.tty === true ? "a pseudo-terminal (tty): `corral attach` types into it" : undefined],
    ["started", timestamp(info.startedAt)],
    ["ended", info.endedAt === undefined ? undefined : timestamp(info.endedAt)]
  ]
  const status = `${Table.paint(color, look.tone, `${look.glyph} ${look.label}`)}  ${Table.badge(Table.elapsedMs(entry, now))}`
  const lines = [
    `${entry.id}  ${status}`,
    ...fields.flatMap(([key, value]) => (value === undefined ? [] : [`${key.padEnd(10)}  ${value}`]))
  ]
  const body = Option.match(output, {
    onNone: () => ["--- no output: it was held by the supervisor, which died or does not answer ---"],
    onSome: ({ dropped, text }) => [
      `--- output: ${Buffer.byteLength(text)} bytes retained${dropped > 0 ? `, ${dropped} older bytes dropped` : ""} ---`,
      ...(text === "" ? [] : [text.endsWith("\n") ? text.slice(0, -1) : text])
    ]
  })
  return [...lines, ...body].join("\n") + "\n"
}

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("show", argv, {})
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    const id = yield* TableCommand.oneId("show", positionals)
    const shown = yield* (yield* ControlClient).show(id)
    yield* write(format(shown, yield* Clock.currentTimeMillis, TableCommand.useColor(1)))
    return 0
  })

/** Runs `corral show` with the words after `show`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("show", program(argv), Layer.empty)
