/**
 * `corral mcp`: the shell tools served over the Model Context Protocol on
 * stdin and stdout. stdout carries protocol messages only; anything else goes
 * to stderr. When stdin closes or a termination signal arrives, every shell
 * is stopped before corral exits; if corral is killed outright, the
 * registry's watcher process stops them.
 */
import * as fs from "node:fs"
import type { ContainmentUnavailable } from "@corral/core/Containment"
import { Containment } from "@corral/core/Containment"
import { Limits } from "@corral/core/Limits"
import { ProcessTable } from "@corral/core/ProcessTable"
import { ShellRegistry } from "@corral/core/ShellRegistry"
import * as McpTools from "@corral/tools/McpTools"
import { PermissionGate } from "@corral/tools/PermissionGate"
import * as ShellTools from "@corral/tools/ShellTools"
import * as McpServer from "@effect/ai/McpServer"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import type * as ConfigError from "effect/ConfigError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as ExitCode from "./internal/exitCode.js"
import type { McpArgs } from "./internal/mcpArgs.js"
import * as McpArgsParser from "./internal/mcpArgs.js"
import type * as McpEarlyInitialize from "./internal/mcpEarlyInitialize.js"
import { SERVER_NAME } from "./internal/mcpEarlyInitialize.js"
import * as McpWire from "./internal/mcpWire.js"
import * as Signals from "./internal/signals.js"
import * as Stdio from "./internal/stdio.js"
import { printError, printFailure, writeOut } from "./internal/stdio.js"
import type { UsageError } from "./internal/usageError.js"

export const usage = `usage: corral mcp [--cwd DIR] [--max-shells N] [--grace D] [--containment C]
                  [--shell PATH] [--name NAME]

Serves background shells to an AI agent over the Model Context Protocol
(MCP) on stdin and stdout, with five tools: bash (foreground, yield_ms, or
run_in_background), bash_output (new output, tail, filter, wait_for),
kill_bash, list_shells and write_stdin. Every command runs in a process
group of its own, and stopping one stops everything it started. bash with
tty: true runs a program that needs a terminal (a REPL, a prompt) on a
pseudo-terminal; it needs the optional package @lydell/node-pty.

When stdin closes, or on SIGINT, SIGTERM or SIGHUP, corral stops every shell
before it exits. If corral itself is killed (SIGKILL), its watcher process
stops them. Nothing but protocol messages is written to stdout.

options:
  --cwd DIR         where commands run unless a call gives workdir
                    (default: the current directory)
  --max-shells N    background shells at once (default 16, or CORRAL_MAX_SHELLS)
  --grace D         how long a stop waits after SIGTERM before SIGKILL
                    (default 3s, or CORRAL_GRACE)
  --containment C   how each shell's processes are held: cgroup (a cgroup v2
                    of its own; root or a delegated subtree), pidns (a PID
                    namespace of its own; unshare, perl, user namespaces),
                    procScan (group, session, tag and descendants), or auto
                    (default, or CORRAL_CONTAINMENT): the first that works
  --shell PATH      the shell command lines run with (PATH -c CMD): a path,
                    or a name looked up in PATH (default: bash, whatever
                    $SHELL says; /bin/sh where bash is not installed)
  --name NAME       what corral ls, show and top call this server
                    (default: the MCP client's name, from initialize)
  -h, --help        print this help

Durations are 500ms, 3s, 2m, 1h or bare seconds (1.5).

To add it to an MCP client, for example in .mcp.json:
  { "mcpServers": { "corral": { "command": "corral", "args": ["mcp"] } } }
`

/** Whose shells the MCP client's are: one client per server, so one owner. */
const OWNER = "mcp"

const version = (): string =>
  JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")).version

const limitsLayer = (args: McpArgs) =>
  Containment.layer(args.containment).pipe(Layer.provideMerge(Layer.merge(
    ProcessTable.layer,
    Limits.layerConfig({
      ...(args.maxShells === undefined ? {} : { maxShells: args.maxShells }),
      ...(args.grace === undefined ? {} : { grace: args.grace })
    })
  )))

/** A client that never sends `initialize` still gets its control socket this long after the start. */
const CONTROL_WITHOUT_INITIALIZE = "1 second"

/**
 * The control socket that `corral ls|show|logs|stop|top` talk to. Without it
 * the server still works, so a socket that cannot be made is a warning. Its
 * HTTP server is loaded and started in the background once `initialize` is
 * answered: the MCP client's first answer does not wait for it, nor share
 * the CPU with it.
 */
const controlEndpoint = (initialized: Deferred.Deferred<void>) =>
  Layer.scopedDiscard(Effect.forkScoped(
    Effect.race(Deferred.await(initialized), Effect.sleep(CONTROL_WITHOUT_INITIALIZE)).pipe(
      Effect.zipRight(Effect.promise(() => import("@corral/core/ControlServer"))),
      Effect.flatMap(({ ControlServer }) => Layer.build(ControlServer.layer)),
      Effect.catchAll((error) => Effect.logWarning(`${error.message}; corral ls and corral stop will not see this server`))
    )
  ))

/**
 * A state directory that cannot be used (read-only, someone else's) costs
 * the journal and the control socket only: the server still starts, and its
 * watcher still stops every shell if it dies.
 */
const registryLayer = (args: McpArgs, initialized: Deferred.Deferred<void>) => {
  const options = { name: args.name ?? "corral mcp", shell: args.shell }
  return controlEndpoint(initialized).pipe(
    Layer.provideMerge(ShellRegistry.layer(options)),
    Layer.catchAll((error) =>
      ShellRegistry.layer({ ...options, journal: false }).pipe(
        Layer.orDie,
        Layer.tap(() =>
          Effect.logWarning(`${error.message}. Until then corral mcp runs without a journal or control socket: corral ls cannot see its shells`)
        )
      )
    )
  )
}

/** Without --name, the supervisor takes the name of the client it serves. */
const nameAfterClient = (args: McpArgs, clientName: Deferred.Deferred<string>) =>
  Layer.scopedDiscard(
    args.name !== undefined ? Effect.void : Effect.forkScoped(
      Effect.flatMap(Deferred.await(clientName), (name) => Effect.flatMap(ShellRegistry, (registry) => registry.rename(name)))
    )
  )

const serverLayer = (
  args: McpArgs,
  stdin: Stream.Stream<Uint8Array>,
  wire: McpWire.Wire,
  clientName: Deferred.Deferred<string>,
  initialized: Deferred.Deferred<void>,
  toolsAdded: Deferred.Deferred<void>
) =>
  Layer.mergeAll(
    McpTools.layer.pipe(Layer.tap(() => Deferred.succeed(toolsAdded, undefined))),
    McpTools.noticesLayer({ owner: OWNER }),
    nameAfterClient(args, clientName)
  ).pipe(
    Layer.provide(ShellTools.layer({ owner: OWNER, cwd: args.cwd })),
    Layer.provide(McpServer.layerStdio({ name: SERVER_NAME, version: version(), stdin, stdout: wire.output(NodeSink.stdout) })),
    Layer.provide(Layer.merge(registryLayer(args, initialized), PermissionGate.layer)),
    Layer.provide(limitsLayer(args))
  )

/** stdin as the server reads it: first what the dispatcher read of it, if anything. */
const stdinAfter = (early: McpEarlyInitialize.Handover | undefined): Stream.Stream<Uint8Array> => {
  if (early === undefined) return NodeStream.stdin
  const rest = early.ended ? Stream.empty : NodeStream.stdin
  return early.read.length === 0 ? rest : Stream.concat(Stream.make(early.read), rest)
}

/**
 * The server runs before its tools are added (it provides the service they
 * are added to): a request it read then would be answered without them
 * (initialize without the tools capability, an empty tools/list). So it
 * reads stdin once they are added, and one timer later: the server sends
 * its clients the tools' list_changed notification from a timer of 0 ms,
 * which is to go to none (no client has initialized yet), as it did when
 * stdin was read no sooner than the event loop's next poll.
 */
const untilToolsAdded = (toolsAdded: Deferred.Deferred<void>) => Effect.zipRight(Deferred.await(toolsAdded), Effect.sleep(0))

/**
 * Serves until stdin closes (exit 0) or a signal arrives (128+N). The server
 * reads a stdin that never ends, so noticing the close is this function's
 * job alone; leaving the scope then stops every shell.
 */
const serve = Effect.fn("Mcp.serve")(function*(args: McpArgs, early: McpEarlyInitialize.Handover | undefined) {
  const signalled = yield* Signals.listen(Signals.terminationSignals)
  const stdinClosed = yield* Deferred.make<void>()
  // what the server cannot take never reaches it: a bad line is answered here, and the next one served
  const clientName = yield* Deferred.make<string>()
  const initialized = yield* Deferred.make<void>()
  const wire = McpWire.make({
    tools: Object.keys(ShellTools.toolkit.tools),
    onClientName: (name) => Deferred.unsafeDone(clientName, Effect.succeed(name)),
    onInitialized: () => Deferred.unsafeDone(initialized, Effect.void),
    answered: early?.answered,
    onAnsweredDiffers: (sent, server) => printError(`internal error: initialize was answered ${sent.trimEnd()} before the server loaded, and the server answers ${server}. Please report it.`)
  })
  const toolsAdded = yield* Deferred.make<void>()
  const stdin = Stream.unwrap(Effect.as(untilToolsAdded(toolsAdded), stdinAfter(early))).pipe(
    Stream.onEnd(Deferred.succeed(stdinClosed, undefined)),
    Stream.concat(Stream.never),
    wire.input(Stdio.write)
  )
  // in a fiber of its own: the stdio protocol interrupts the fiber that built it when it stops reading
  const server = yield* Effect.forkScoped(Layer.launch(serverLayer(args, stdin, wire, clientName, initialized, toolsAdded)))
  const stopped = Effect.raceFirst(Effect.as(Deferred.await(stdinClosed), 0), Effect.map(signalled, ExitCode.ofSignal))
  // a server that cannot start (bad configuration) fails at once
  return yield* Effect.raceFirst(Fiber.join(server), stopped)
}, Effect.scoped)

type McpError = UsageError | ConfigError.ConfigError | ContainmentUnavailable

const messageOf = (error: McpError): string =>
  error._tag === "ConfigError" ? `bad configuration: ${error}` : error.message

const program = (argv: ReadonlyArray<string>, early: McpEarlyInitialize.Handover | undefined) =>
  Effect.gen(function*() {
    const parsed = yield* McpArgsParser.parse(argv)
    if (parsed._tag === "Help") return yield* Effect.as(Effect.sync(() => writeOut(usage)), 0)
    return yield* serve(parsed.args, early)
  }).pipe(
    Effect.catchAll((error: McpError) => Effect.as(Effect.sync(() => printError(messageOf(error))), ExitCode.Failed)),
    // the default logger writes to stdout, which belongs to the protocol
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)))
  )

/**
 * Runs `corral mcp` with the words after `mcp`, then exits: stdin may still
 * be open after a signal, and nothing else is left to wait for. `early` is
 * what the dispatcher read of stdin and answered before this was loaded.
 */
export const main = (argv: ReadonlyArray<string>, early?: McpEarlyInitialize.Handover): void => {
  void Effect.runPromiseExit(program(argv, early)).then((exit) => {
    if (Exit.isFailure(exit)) printFailure(exit.cause)
    process.exit(Exit.isSuccess(exit) ? exit.value : ExitCode.Failed)
  })
}
