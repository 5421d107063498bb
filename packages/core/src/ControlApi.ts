/**
 * The control endpoint's contract, declared once as an `@effect/platform`
 * `HttpApi`: `ControlServer` derives the supervisor's server from it, and
 * `corral ls|show|logs|stop|top` their client. HTTP over a unix socket, JSON
 * bodies in the `Shell` schemas, and every route takes a registry shell id,
 * never a pid.
 *
 * The follow route streams the shell's output as plain bytes: its success is
 * declared without a body schema, so the client reads the response as a
 * stream instead of decoding it whole.
 */
import * as path from "node:path"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import * as Journal from "./Journal.js"
import { Delivered, Input, ShellInfo, StopReport, Supervisor, TerminalSize } from "./Shell.js"

/**
 * Prefixes every route; bumped when a route or body changes incompatibly.
 *
 * @since 0.1.0
 */
export const version = "v1"

/**
 * Next to the journal, with the same name (`Journal.nameOf`): `<pid namespace>-<pid>.sock`.
 *
 * @since 0.1.0
 */
export const socketPath = (stateDir: string, name: string) => path.join(Journal.directory(stateDir), `${name}.sock`)

/**
 * `sun_path` holds 108 bytes with the terminating NUL; Node truncates longer paths silently.
 *
 * @since 0.1.0
 */
export const maxSocketPathBytes = 107

/**
 * The largest request body a supervisor reads: far over what a client sends
 * (`corral attach` sends each chunk of its input as it comes, at most 64 KiB,
 * under 384 KiB as JSON), and far under what would end it: a body of 1 GiB
 * read whole overflowed a string, and `corral mcp` died of it.
 *
 * @since 0.1.0
 */
export const maxRequestBytes = 1024 * 1024

/**
 * The most connections a supervisor holds open at once; one more is closed
 * as it comes. Each holds a descriptor, and 3000 left the supervisor none
 * for a shell's pipes at `ulimit -n` 1024; a person's `corral logs -f`,
 * `attach` and `top` hold one each.
 *
 * @since 0.1.0
 */
export const maxConnections = 128

/**
 * A registry's own id: `s` and a counter.
 *
 * @since 0.1.0
 */
export const localIdPattern = /^s[1-9][0-9]{0,8}$/

/**
 * The shell a route names. Any string reaches the handler, which refuses one
 * that is not a registry id with `InvalidShellId`: a bad id is the caller's
 * mistake, and is answered as one.
 *
 * @since 0.1.0
 */
export const ShellPath = Schema.Struct({ id: Schema.String })

/**
 * @since 0.1.0
 */
export const ListResponse = Schema.Struct({
  supervisor: Supervisor,
  shells: Schema.Array(ShellInfo)
})

/**
 * @since 0.1.0
 */
export const ShowResponse = Schema.Struct({
  supervisor: Supervisor,
  shell: ShellInfo,
  output: Schema.String,
  /** Bytes the buffer dropped before the retained output. */
  dropped: Schema.Number
})

/**
 * @since 0.1.0
 */
export const Stopped = Schema.Struct({
  /** After the stop. */
  shell: ShellInfo,
  report: StopReport,
  /** False when the shell had already ended: the report is then its earlier one. */
  wasActive: Schema.Boolean
})

/**
 * @since 0.1.0
 */
export const StopAllResponse = Schema.Struct({ stopped: Schema.Array(Stopped) })

/**
 * What `ShellInput.send` did with the input.
 *
 * @since 0.1.0
 */
export const StdinResponse = Schema.Struct({ delivered: Delivered })

/**
 * The shell takes no input: no stdin pipe or terminal, or its stdin was closed.
 *
 * @since 0.1.0
 */
export const NoStdin = Schema.Struct({
  error: Schema.Literal("NoStdin"),
  message: Schema.String
}).annotations(HttpApiSchema.annotations({ status: 409 }))

/**
 * The terminal's size after a resize.
 *
 * @since 0.1.0
 */
export const ResizeResponse = Schema.Struct({ size: TerminalSize })

/**
 * The shell has no terminal to resize: it was started without one, or it has ended.
 *
 * @since 0.1.0
 */
export const NoTerminal = Schema.Struct({
  error: Schema.Literal("NoTerminal"),
  message: Schema.String
}).annotations(HttpApiSchema.annotations({ status: 409 }))

/**
 * The id is not a registry id (`s` and a number).
 *
 * @since 0.1.0
 */
export const InvalidShellId = Schema.Struct({
  error: Schema.Literal("InvalidShellId"),
  message: Schema.String
}).annotations(HttpApiSchema.annotations({ status: 400 }))

/**
 * No shell with that id in this registry (any more).
 *
 * @since 0.1.0
 */
export const UnknownShell = Schema.Struct({
  error: Schema.Literal("UnknownShell"),
  message: Schema.String,
  known: Schema.optional(Schema.Array(Schema.String))
}).annotations(HttpApiSchema.annotations({ status: 404 }))

/**
 * The follow route's body: the shell's output as it is written, read as a
 * byte stream (no schema decodes it).
 *
 * @since 0.1.0
 */
export const OutputStream = Schema.Void.annotations(HttpApiSchema.annotations({
  status: 200,
  description: "text/plain: the retained output, then live output until the shell's output ends"
}))

/**
 * A supervisor's shells, by registry id.
 *
 * @since 0.1.0
 */
export class Shells extends HttpApiGroup.make("shells")
  .add(HttpApiEndpoint.get("list", "/shells").addSuccess(ListResponse))
  .add(HttpApiEndpoint.get("show", "/shells/:id").setPath(ShellPath).addSuccess(ShowResponse))
  .add(HttpApiEndpoint.get("follow", "/shells/:id/follow").setPath(ShellPath).addSuccess(OutputStream))
  .add(HttpApiEndpoint.post("stop", "/shells/:id/stop").setPath(ShellPath).addSuccess(Stopped))
  .add(HttpApiEndpoint.post("stdin", "/shells/:id/stdin").setPath(ShellPath).setPayload(Input).addSuccess(StdinResponse).addError(NoStdin))
  .add(
    HttpApiEndpoint.post("resize", "/shells/:id/resize").setPath(ShellPath).setPayload(TerminalSize).addSuccess(ResizeResponse).addError(NoTerminal)
  )
  .add(HttpApiEndpoint.post("stopAll", "/stop-all").addSuccess(StopAllResponse))
  .addError(InvalidShellId)
  .addError(UnknownShell)
  .prefix(`/${version}`)
{}

/**
 * The control endpoint of one supervisor.
 *
 * @since 0.1.0
 */
export class ControlApi extends HttpApi.make("corral-control").add(Shells) {}
