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
 * tool's does, and a resize of its terminal through the registry, both for
 * the operator as a stop is.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Api from "./ControlApi.js"
import * as Journal from "./Journal.js"
import type { OutputChunk } from "./OutputBuffer.js"
import type { UnknownShell } from "./ShellRegistry.js"
import { isActive, ShellRegistry } from "./ShellRegistry.js"
import * as ShellInput from "./ShellInput.js"
import * as StateDir from "./StateDir.js"

export { socketPath } from "./ControlApi.js"

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
  // each connection holds a descriptor: a flood of them left none for the shells' pipes
  node.maxConnections = Api.maxConnections
  const server = yield* NodeHttpServer.make(() => node, { path }).pipe(
    Effect.mapError((error) => new ControlSocketError({ path, reason: String(error.cause), cause: error }))
  )
  // a follower's response lasts as long as its shell: without this, closing the server would wait for it
  yield* Effect.addFinalizer(() => Effect.sync(() => node.closeAllConnections()))
  yield* restrictToOwner(path)
  // what a derived app may ask of its platform (file bodies, etags); these routes ask for none of it
  const platform = yield* Layer.build(NodeHttpServer.layerContext)
  yield* server.serve(refuseLarge(yield* httpApp)).pipe(
    // what declares no length, or lies about it, is cut off where it passes the bound
    HttpIncomingMessage.withMaxBodySize(Option.some(Api.maxRequestBytes)),
    Effect.provide(platform)
  )
  return ControlServer.of({ path })
})

/** A body declared longer than `Api.maxRequestBytes` is refused before any of it is read, and the connection closed after the answer. */
const refuseLarge = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const declared = Number(request.headers["content-length"] ?? 0)
    if (!(declared > Api.maxRequestBytes)) return app
    return Effect.succeed(HttpServerResponse.unsafeJson({
      error: "RequestTooLarge",
      message: `a request body of ${declared} bytes is over the limit of ${Api.maxRequestBytes}: send input in smaller parts`
    }, { status: 413, headers: { connection: "close" } }))
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

/** A registry id, or the refusal the client reads. */
const shellId = ({ id }: typeof Api.ShellPath.Type) =>
  Api.localIdPattern.test(id)
    ? Effect.succeed(id)
    : Effect.fail(Api.InvalidShellId.make({
      error: "InvalidShellId",
      message: `invalid shell id ${JSON.stringify(id)}: a registry id is "s" and a number, like s1`
    }))

/** An unknown shell as the refusal the client reads; other failures stay defects (500). */
const refusal = (e: UnknownShell) => Api.UnknownShell.make({ error: "UnknownShell", message: e.message, known: e.known })

/** The shell the path names, with its owner: the operator acts on behalf of whichever agent owns it, as a stop does. */
const owned = (path: typeof Api.ShellPath.Type) =>
  Effect.gen(function*() {
    const id = yield* shellId(path)
    const registry = yield* ShellRegistry
    const { owner } = yield* Effect.mapError(registry.info(id), refusal)
    return { id, registry, owner }
  })

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

/** The routes of `ControlApi`, each a call of the registry by shell id. */
const handlers = HttpApiBuilder.group(Api.ControlApi, "shells", (handlers) =>
  handlers
    .handle("list", () =>
      Effect.flatMap(ShellRegistry, (registry) =>
        Effect.map(registry.list, (shells) => ({ supervisor: registry.supervisor, shells }))))
    .handle("show", ({ path }) =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const { dropped, info, text } = yield* Effect.mapError(readAll(yield* shellId(path)), refusal)
        return { supervisor: registry.supervisor, shell: info, output: text, dropped }
      }))
    .handle("follow", ({ path }) =>
      Effect.gen(function*() {
        const id = yield* shellId(path)
        yield* Effect.mapError(Effect.flatMap(ShellRegistry, (registry) => registry.info(id)), refusal)
        const context = yield* Effect.context<ShellRegistry>()
        return HttpServerResponse.stream(Stream.provideContext(followOutput(id), context), {
          contentType: "text/plain; charset=utf-8"
        })
      }))
    .handle("stdin", ({ path, payload }) =>
      Effect.gen(function*() {
        const { id, owner } = yield* owned(path)
        const delivered = yield* ShellInput.send(id, payload, { owner }).pipe(
          Effect.catchTags({
            NotOwner: Effect.die,
            UnknownShell: (e) => Effect.fail(refusal(e)),
            NoStdin: (e) => Effect.fail(Api.NoStdin.make({ error: "NoStdin", message: e.message }))
          })
        )
        return { delivered }
      }))
    .handle("resize", ({ path, payload }) =>
      Effect.gen(function*() {
        const { id, owner, registry } = yield* owned(path)
        yield* registry.resize(id, payload, { owner }).pipe(
          Effect.catchTags({
            // the payload's schema has the same bounds
            InvalidTerminalSize: Effect.die,
            NotOwner: Effect.die,
            UnknownShell: (e) => Effect.fail(refusal(e)),
            NoTerminal: (e) => Effect.fail(Api.NoTerminal.make({ error: "NoTerminal", message: e.message }))
          })
        )
        return { size: payload }
      }))
    .handle("stop", ({ path }) => Effect.flatMap(shellId(path), (id) => Effect.mapError(stopShell(id), refusal)))
    .handle("stopAll", () =>
      Effect.gen(function*() {
        const registry = yield* ShellRegistry
        const active = (yield* registry.list).filter((s) => isActive(s.status))
        const stopped = yield* Effect.forEach(
          active,
          // a shell dropped since the list needs no stop
          (s) => Effect.option(stopShell(s.id)),
          { concurrency: "unbounded" }
        )
        return { stopped: stopped.flatMap(Option.toArray) }
      }))
)

/** The server `ControlApi` derives, with the registry's handlers, as one app to serve. */
const httpApp = HttpApiBuilder.httpApp.pipe(
  Effect.provide(
    HttpApiBuilder.api(Api.ControlApi).pipe(
      Layer.provide(handlers),
      Layer.merge(HttpApiBuilder.Router.Live),
      Layer.merge(HttpApiBuilder.Middleware.layer)
    )
  )
)
