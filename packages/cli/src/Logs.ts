/** `corral logs ID [-f]`: a background shell's output, followed live with `-f`. */
import { ControlClient, OutputUnavailable } from "./internal/controlClient.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { followShell } from "./internal/followShell.js"
import { write, writeOut } from "./internal/stdio.js"
import * as TableCommand from "./internal/tableCommand.js"

export const usage = `usage: corral logs ID [-f]

Prints the output a background shell's supervisor retained, stdout and
stderr as they interleaved. ID is <supervisor pid>:<shell id> as
\`corral ls\` prints it, like 4242:s1.

options:
  -f, --follow  then print new output as it comes, until the shell's output
                ends (it exited, or was stopped); Ctrl-C stops following.
                A reader that falls further behind than the supervisor
                retains skips ahead, at a line saying how many bytes
  -h, --help    print this help
`

const retained = (id: string) =>
  Effect.gen(function*() {
    const { entry, output } = yield* (yield* ControlClient).show(id)
    if (Option.isNone(output)) return yield* new OutputUnavailable({ id, supervisor: entry.supervisor })
    yield* write(output.value.text)
  })

const program = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { positionals, values } = yield* TableCommand.parse("logs", argv, { follow: { type: "boolean", short: "f" } })
    if (values.help) return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    const id = yield* TableCommand.oneId("logs", positionals)
    yield* values.follow ? followShell(id) : retained(id)
    return 0
  })

/** Runs `corral logs` with the words after `logs`; sets the process's exit code when done. */
export const main = (argv: ReadonlyArray<string>): void => TableCommand.run("logs", program(argv), Layer.empty)
