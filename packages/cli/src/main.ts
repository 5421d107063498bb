/**
 * `corral <command>`: loads only the module of the command asked for, so a
 * command pays for its own imports alone. `corral run` wraps every command it
 * runs: its start-up is added to each of them. Each `import()` names its
 * module literally, so the bundle (scripts/bundle-cli.mjs) splits there.
 *
 * A command module (`Run.ts`, `Mcp.ts`, ...) exports `main(args)`, called with
 * the words after the command name; from then on it owns the process and sets
 * `process.exitCode`. `corral mcp` is given what the dispatcher read of stdin
 * too: its client's `initialize` is answered before its code is loaded.
 */
import * as fs from "node:fs"
import * as v8 from "node:v8"
import { Failed } from "./internal/exitCode.js"
import * as McpEarlyInitialize from "./internal/mcpEarlyInitialize.js"
import { exhaustion, printError, writeOut } from "./internal/print.js"

interface CommandModule {
  readonly main: (args: ReadonlyArray<string>, early?: McpEarlyInitialize.Handover) => void
}

interface Command {
  readonly load: () => Promise<CommandModule>
  /**
   * V8 flags the command runs with, set before its code is loaded: V8 keys
   * compiled code by its flags, so a flag set later would leave the bundle's
   * code cache (internal/codeCache.ts) unusable at every start.
   */
  readonly v8Flags?: ReadonlyArray<string>
  /**
   * What the command's client waits for first, done before its code is
   * loaded; its result is handed to the command's `main`.
   */
  readonly early?: (args: ReadonlyArray<string>) => Promise<McpEarlyInitialize.Handover | undefined>
  readonly synopsis: string
  readonly summary: string
}

const commands: Readonly<Record<string, Command>> = {
  run: {
    load: () => import("./Run.js"),
    synopsis: "run [OPTION]... [DURATION] CMD [ARG]...",
    summary: "timeout(1) for CMD's whole process group: stop all of it when CMD ends or times out"
  },
  mcp: {
    load: () => import("./Mcp.js"),
    // a model's filter or wait_for that backtracks too much goes on in V8's
    // linear-time engine instead of running into the pattern workers' time
    // limit; nothing else changes (it acts only past 50,000 backtracks)
    v8Flags: ["--enable-experimental-regexp-engine-on-excessive-backtracks"],
    // the answer to `initialize`, which needs nothing the server loads (docs/adr/0024)
    early: (args) => McpEarlyInitialize.start(args, version),
    synopsis: "mcp [--cwd DIR] [--max-shells N] [--grace D]",
    summary: "serve background shells to an AI agent over MCP (stdio)"
  },
  ls: { load: () => import("./Ls.js"), synopsis: "ls [--json]", summary: "list the background shells of every corral supervisor on this machine" },
  show: { load: () => import("./Show.js"), synopsis: "show ID", summary: "show one background shell" },
  logs: { load: () => import("./Logs.js"), synopsis: "logs ID [-f]", summary: "print a background shell's output" },
  stop: { load: () => import("./Stop.js"), synopsis: "stop ID | stop --all", summary: "stop a background shell and everything it started" },
  attach: { load: () => import("./Attach.js"), synopsis: "attach ID", summary: "type into a background shell and follow its output; Ctrl-] detaches" },
  top: { load: () => import("./Top.js"), synopsis: "top", summary: "a live view of every background shell; Enter follows one's output" }
}

const usage = () =>
  [
    "usage: corral <command> [options] [args]",
    "",
    ...Object.values(commands).flatMap((c) => [`  corral ${c.synopsis}`, `      ${c.summary}`]),
    "",
    "`corral <command> --help` describes a command; `corral --version` prints the version.",
    ""
  ].join("\n")

const version = (): string =>
  JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")).version

const fail = (message: string) => {
  printError(message)
  process.exitCode = Failed
}

const dispatch = async (name: string, args: ReadonlyArray<string>) => {
  const command = Object.hasOwn(commands, name) ? commands[name]! : undefined
  if (command === undefined) {
    const what = name.startsWith("-") ? "option" : "command"
    return fail(`unknown ${what} ${JSON.stringify(name)}: run \`corral --help\` for the commands`)
  }
  for (const flag of command.v8Flags ?? []) v8.setFlagsFromString(flag)
  const early = await command.early?.(args)
  ;(await command.load()).main(args, early)
}

// Without a listener, SIGUSR1 makes Node open its inspector on 127.0.0.1:9229, where any local user may run code in
// this process: this one keeps it shut. `corral run` passes USR1 on to CMD's group once CMD runs (Signals.queue)
process.on("SIGUSR1", () => {})

const [name, ...args] = process.argv.slice(2)
try {
  if (name === undefined || name === "--help" || name === "-h" || (name === "help" && args.length === 0)) {
    writeOut(usage())
  } else if (name === "--version" || name === "-V") {
    writeOut(`${version()}\n`)
  } else if (name === "help") {
    await dispatch(args[0]!, ["--help"])
  } else {
    await dispatch(name, args)
  }
} catch (error) {
  // loading a command reads its files: at a low `ulimit -n` that is what fails first
  const ranOut = exhaustion(error)
  if (ranOut === undefined) throw error
  fail(`cannot go on: ${ranOut}`)
}
