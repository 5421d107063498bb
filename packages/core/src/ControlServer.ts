/**
 * The control endpoint: a supervisor that composes this layer with its
 * `ShellRegistry` answers `corral ls|show|logs|stop|top` over HTTP on a unix
 * socket next to its journal, `<stateDir>/supervisors/<pid namespace>-<pid>.sock`.
 *
 * Who can use it: the socket is 0600 in a 0700 directory, so only the user
 * running the supervisor (and root) can connect, the person at the keyboard
 * who could signal these processes with kill(1) anyway. The endpoint acts for
 * that person, the operator: it stops a shell whichever agent owns it. The
 * stop still goes through the registry, with the same policy and report.
 *
 * What it can reach: the registry's own shells, named by registry id. No
 * route takes a pid, so no request can signal any other process. Input to a
 * shell (`corral attach`) goes through `ShellInput`, as the `write_stdin`
 * tool's does, for the operator as a stop is.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type { HttpBodyError } from "@effect/platform/HttpBody"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Api from "./internal/controlApi.js"
import * as Journal from "./Journal.js"
import type { OutputChunk } from "./OutputBuffer.js"
import * as ShellInput from "./ShellInput.js"
import type { NoStdin, UnknownShell } from "./ShellRegistry.js"
import { isActive, ShellRegistry } from "./ShellRegistry.js"
import * as StateDir from "./StateDir.js"

export { socketPath } from "./internal/controlApi.js"

export class ControlSocketError extends Data.TaggedError("ControlSocketError")<{
  readonly path: string
  readonly reason: string
  readonly cause?: unknown
}> {
  override get message() {
    return `cannot serve the control endpoint at ${this.path}: ${this.reason}`
  }
}

export class ControlServer extends Context.Tag("@corral/core/ControlServer")<ControlServer, {
  /** The socket `corral` connects to. */
  readonly path: string
}>() {
  /** Serves the registry's shells until the layer is released, which removes the socket. */
  static readonly layer: Layer.Layer<ControlServer, ControlSocketError, ShellRegistry> = Layer.scoped(
    ControlServer,
    // `make` is defined below this class
    Effect.suspend(() => make)
  )
}

class InvalidShellId extends Data.TaggedError("InvalidShellId")<{ readonly id: string }> {
  override get message() {
    return `invalid shell id ${JSON.stringify(this.id)}: a registry id is "s" and a number, like s1`
  }
}

const make = Effect.gen(function*() {
  const registry = yield* ShellRegistry
  const path = Api.socketPath(registry.stateDir, Journal.nameOf(registry.supervisor))
  if (Buffer.byteLength(path) > Api.maxSocketPathBytes) {
    return yield* new ControlSocketError({
      path,
      reason: `a unix socket path holds at most ${Api.maxSocketPathBytes} bytes: set CORRAL_STATE_DIR to a shorter directory`
    })
  }
  yield* StateDir.ensure(registry.stateDir).pipe(
    Effect.zipRight(StateDir.ensure(Journal.directory(registry.stateDir))),
    Effect.mapError((error) => new ControlSocketError({ path, reason: error.message, cause: error }))
  )
  // the socket is named after our namespace and pid: a file already there was left by a dead process that had them
  const removeSocket = Effect.try({
    try: () => fs.rmSync(path, { force: true }),
    catch: (cause) => new ControlSocketError({ path, reason: `cannot remove what is there: ${StateDir.reasonOf(cause)}`, cause })
  })
  yield* removeSocket
  yield* Effect.addFinalizer(() => Effect.ignore(removeSocket))
  const node = http.createServer()
  const server = yield* NodeHttpServer.make(() => node, { path }).pipe(
    Effect.mapError((error) => new ControlSocketError({ path, reason: String(error.cause), cause: error }))
  )
  // a follower's response lasts as long as its shell: without this, closing the server would wait for it
  yield* Effect.addFinalizer(() => Effect.sync(() => node.closeAllConnections()))
  yield* restrictToOwner(path)
  yield* server.serve(router)
  return ControlServer.of({ path })
})

/**
 * Set explicitly: the socket is created with whatever the umask allows. Until
 * this runs, the 0700 directory keeps everyone else away from it.
 */
const restrictToOwner = (path: string) =>
  Effect.try({
    try: () => {
      fs.chmodSync(path, 0o600)
      // lstat: what is at the path now, not what a link there would point to
      const stat = fs.lstatSync(path)
      if (!stat.isSocket()) throw new Error("something else replaced it")
      if ((stat.mode & 0o777) !== 0o600) throw new Error(`its mode is ${(stat.mode & 0o777).toString(8)} after chmod 600`)
    },
    catch: (cause) => new ControlSocketError({ path, reason: `cannot make it private: ${String(cause)}`, cause })
  })

const shellId = Effect.flatMap(HttpRouter.params, (params) => {
  const id = params.id ?? ""
  return Api.localIdPattern.test(id) ? Effect.succeed(id) : Effect.fail(new InvalidShellId({ id }))
})

const errorResponse = (status: number, body: typeof Api.ErrorResponse.Type) =>
  HttpServerResponse.schemaJson(Api.ErrorResponse)(body, { status })

/** A bad id or an unknown shell as the error body the client reads; other failures stay defects (500). */
const handle = <R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, InvalidShellId | UnknownShell | HttpBodyError, R>
) =>
  Effect.catchTags(handler, {
    InvalidShellId: (e) => errorResponse(400, { error: "InvalidShellId", message: e.message }),
    UnknownShell: (e) => errorResponse(404, { error: "UnknownShell", message: e.message, known: e.known })
  })

/** The operator's input: on behalf of whichever agent owns the shell, as a stop is. */
const sendInput = (id: string) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const input = yield* HttpServerRequest.schemaBodyJson(Api.StdinRequest).pipe(
      Effect.mapError((e) => new InvalidRequest({ reason: e._tag === "ParseError" ? e.message : "the body is not JSON" }))
    )
    const { owner } = yield* registry.info(id)
    const delivered = yield* ShellInput.send(id, input, { owner }).pipe(Effect.catchTag("NotOwner", Effect.die))
    return yield* HttpServerResponse.schemaJson(Api.StdinResponse)({ delivered })
  })

class InvalidRequest extends Data.TaggedError("InvalidRequest")<{ readonly reason: string }> {
  override get message() {
    return `invalid input for a shell: ${this.reason}. Send {"text"?: string, "eof"?: boolean}`
  }
}

const handleInput = handle(Effect.flatMap(shellId, sendInput).pipe(
  Effect.catchTags({
    NoStdin: (e: NoStdin) => errorResponse(409, { error: "NoStdin", message: e.message }),
    InvalidRequest: (e: InvalidRequest) => errorResponse(400, { error: "InvalidRequest", message: e.message })
  })
))

const readAll = (id: string) =>
  Effect.flatMap(ShellRegistry, (registry) => registry.output(id, { mode: "all" })).pipe(
    // mode "all" takes no pattern or count: these cannot happen
    Effect.catchTags({ InvalidPattern: Effect.die, InvalidOption: Effect.die })
  )

const skipped = (bytes: number) =>
  new Uint8Array(Buffer.from(`\n--- corral: ${bytes} bytes skipped here: this reader fell behind the output ---\n`))

/**
 * The retained output, then live output until the shell's output ends. It is
 * read from the shell's buffer as the connection takes it, so a follower that
 * stops reading holds no output in the supervisor; one that falls more than
 * the buffer behind skips what was dropped meanwhile, and is told how much.
 */
const followOutput = (id: string) =>
  Stream.unwrap(Effect.map(
    Effect.flatMap(ShellRegistry, (registry) => registry.follow(id, { retained: true })),
    (chunks) =>
      chunks.pipe(
        // the first chunk is where the retained output begins: no skip before it
        Stream.mapAccum(undefined as number | undefined, (next, chunk: OutputChunk) => {
          const gap = next === undefined ? 0 : chunk.offset - next
          return [chunk.offset + chunk.bytes.length, gap > 0 ? [skipped(gap), chunk.bytes] : [chunk.bytes]] as const
        }),
        Stream.flattenIterables
      )
  ))

const stopShell = (id: string) =>
  Effect.gen(function*() {
    const registry = yield* ShellRegistry
    const before = yield* registry.info(id)
    // the operator's stop: on behalf of whichever agent owns the shell
    const report = yield* registry.kill(id, { owner: before.owner }).pipe(Effect.catchTag("NotOwner", Effect.die))
    const after = yield* Effect.orElseSucceed(registry.info(id), () => before)
    return { shell: after, report, wasActive: isActive(before.status) }
  })

const router = HttpRouter.empty.pipe(
  HttpRouter.get(
    Api.routes.shells,
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      return yield* HttpServerResponse.schemaJson(Api.ListResponse)({
        supervisor: registry.supervisor,
        shells: yield* registry.list
      })
    })
  ),
  HttpRouter.get(
    Api.routes.shell,
    handle(Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const id = yield* shellId
      const { dropped, info, text } = yield* readAll(id)
      return yield* HttpServerResponse.schemaJson(Api.ShowResponse)({
        supervisor: registry.supervisor,
        shell: info,
        output: text,
        dropped
      })
    }))
  ),
  HttpRouter.get(
    Api.routes.follow,
    handle(Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const id = yield* shellId
      yield* registry.info(id)
      const context = yield* Effect.context<ShellRegistry>()
      return HttpServerResponse.stream(Stream.provideContext(followOutput(id), context), {
        contentType: "text/plain; charset=utf-8"
      })
    }))
  ),
  HttpRouter.post(
    Api.routes.stop,
    handle(Effect.flatMap(shellId, stopShell).pipe(Effect.flatMap(HttpServerResponse.schemaJson(Api.Stopped))))
  ),
  HttpRouter.post(Api.routes.stdin, handleInput),
  HttpRouter.post(
    Api.routes.stopAll,
    Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const active = (yield* registry.list).filter((s) => isActive(s.status))
      const stopped = yield* Effect.forEach(
        active,
        // a shell dropped since the list needs no stop
        (s) => Effect.option(stopShell(s.id)),
        { concurrency: "unbounded" }
      )
      return yield* HttpServerResponse.schemaJson(Api.StopAllResponse)({ stopped: stopped.flatMap(Option.toArray) })
    })
  )
)
