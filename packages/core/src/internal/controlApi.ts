/**
 * The control endpoint's wire format, shared by server and client: HTTP over
 * a unix socket, JSON bodies checked by these schemas on both sides, and the
 * follow route as a plain byte stream of the shell's output.
 */
import * as path from "node:path"
import * as Schema from "effect/Schema"
import * as Journal from "../Journal.js"
import { ShellInfo, StopReport, Supervisor } from "../Shell.js"

/** Bumped when a route or body changes incompatibly. */
export const version = "v1"

export const routes = {
  shells: `/${version}/shells`,
  shell: `/${version}/shells/:id`,
  follow: `/${version}/shells/:id/follow`,
  stop: `/${version}/shells/:id/stop`,
  stdin: `/${version}/shells/:id/stdin`,
  stopAll: `/${version}/stop-all`
} as const

export const pathOf = (route: string, id: string) => route.replace(":id", id)

/** Next to the journal, with the same name (`Journal.nameOf`): `<pid namespace>-<pid>.sock`. */
export const socketPath = (stateDir: string, name: string) => path.join(Journal.directory(stateDir), `${name}.sock`)

/** `sun_path` holds 108 bytes with the terminating NUL; Node truncates longer paths silently. */
export const maxSocketPathBytes = 107

/** A registry's own id: `s` and a counter. */
export const localIdPattern = /^s[1-9][0-9]{0,8}$/

export const LocalId = Schema.String.pipe(Schema.pattern(localIdPattern))

export const ListResponse = Schema.Struct({
  supervisor: Supervisor,
  shells: Schema.Array(ShellInfo)
})

export const ShowResponse = Schema.Struct({
  supervisor: Supervisor,
  shell: ShellInfo,
  output: Schema.String,
  /** Bytes the buffer dropped before the retained output. */
  dropped: Schema.Number
})

export const Stopped = Schema.Struct({
  /** After the stop. */
  shell: ShellInfo,
  report: StopReport,
  /** False when the shell had already ended: the report is then its earlier one. */
  wasActive: Schema.Boolean
})

export const StopAllResponse = Schema.Struct({ stopped: Schema.Array(Stopped) })

/** Input for a shell, as `ShellInput.send` takes it. */
export const StdinRequest = Schema.Struct({
  text: Schema.optional(Schema.String),
  eof: Schema.optional(Schema.Boolean)
})

/** What `ShellInput.send` did with it. */
export const StdinResponse = Schema.Struct({
  delivered: Schema.Union(
    Schema.TaggedStruct("Signaled", { signal: Schema.String, key: Schema.String }),
    Schema.TaggedStruct("Written", { chars: Schema.Number, eof: Schema.Boolean, tty: Schema.Boolean })
  )
})

export const ErrorResponse = Schema.Struct({
  error: Schema.Literal("InvalidShellId", "UnknownShell", "NoStdin", "InvalidRequest"),
  message: Schema.String,
  known: Schema.optional(Schema.Array(Schema.String))
})
