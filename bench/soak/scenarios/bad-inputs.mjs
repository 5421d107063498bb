// Bad input must come back as an error that names the problem, never a crash:
// through the agent tools (issue 4's list and more), as a host calls them,
// and through the registry's own API for what the tools never pass on.
import * as fs from "node:fs"
import * as path from "node:path"
import { ShellRegistry } from "@corral/core"
import { PermissionGate, ShellTools } from "@corral/tools"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { check, OWNER, registryLayer, start } from "../lib/harness.mjs"

const callTool = (name, params) => Effect.flatMap(ShellTools.toolkit, (toolkit) => toolkit.handle(name, params))

/** [what, tool, params, a piece of the bad input the message must name] */
const toolCases = (missingDir) => [
  ["empty command", "bash", { command: "" }, "empty"],
  ["blank command", "bash", { command: "  \t" }, "empty"],
  ["NUL byte in the command", "bash", { command: "echo a\0b" }, "NUL"],
  ["NUL byte in a background command", "bash", { command: "echo a\0b", run_in_background: true }, "NUL"],
  ["workdir that does not exist", "bash", { command: "ls", workdir: missingDir }, missingDir],
  ["timeout over the maximum", "bash", { command: "ls", timeout: 600_001 }, "600001"],
  ["timeout 0", "bash", { command: "ls", timeout: 0 }, "0"],
  ["unknown id", "bash_output", { shell_id: "s999" }, "s999"],
  ["unknown bash_id", "bash_output", { bash_id: "nope" }, "nope"],
  ["no id", "bash_output", {}, "shell_id"],
  ["invalid filter regex", "bash_output", { shell_id: "s1", filter: "(" }, "("],
  ["invalid wait_for regex", "bash_output", { shell_id: "s1", wait_for: "[a-" }, "[a-"],
  ["tail_lines 0", "bash_output", { shell_id: "s1", tail_lines: 0 }, "tail_lines"],
  ["tail_lines -3", "bash_output", { shell_id: "s1", tail_lines: -3 }, "-3"],
  ["tail_lines 1.5", "bash_output", { shell_id: "s1", tail_lines: 1.5 }, "1.5"],
  ["wait_timeout over the maximum", "bash_output", { shell_id: "s1", wait_for: "x", wait_timeout: 600_001 }, "600001"],
  ["kill of an unknown id", "kill_bash", { shell_id: "s999" }, "s999"]
]

/** Inputs the tools' schemas refuse before any handler runs: a typed failure is right, a defect is a crash. */
const malformedCases = [
  ["command not a string", "bash", { command: 5 }],
  ["tail_lines not a number", "bash_output", { shell_id: "s1", tail_lines: "many" }],
  ["no such tool", "rm_rf", {}]
]

/** [what, attempt, expected error tag] */
const registryCases = (registry, shell, file) => [
  ["empty argv", start([]), "EmptyCommand"],
  ["cwd that is a file", start("true", { cwd: file }), "InvalidCwd"],
  ["program not found", start(["/nonexistent/corral-soak-program"]), "SpawnError"],
  ["unknown id to info", registry.info("no such id"), "UnknownShell"],
  ["negative wait", registry.output(shell, { waitFor: "x", waitMs: -1 }), "InvalidOption"],
  ["unknown mode", registry.output(shell, { mode: "everything" }), "InvalidOption"],
  ["kill by another owner", registry.kill(shell, { owner: "someone-else" }), "NotOwner"]
]

const layer = (ctx) =>
  ShellTools.layer({ owner: OWNER }).pipe(Layer.provideMerge(PermissionGate.layer), Layer.provideMerge(registryLayer(ctx)))

export default {
  id: "bad-inputs",
  summary: "tool handlers and registry given empty/NUL commands, bad dirs, unknown ids, bad regex, lines < 1, ...",
  orphans: false,
  run: (ctx) =>
    Effect.provide(Effect.gen(function*() {
      const registry = yield* ShellRegistry
      const file = path.join(ctx.stateDir, "not-a-directory")
      fs.writeFileSync(file, "")
      const started = yield* callTool("bash", { command: "echo ready; exec sleep 60", run_in_background: true })
      yield* check(!started.isFailure && started.result.metadata.shell_id === "s1", `the background start for the bad reads failed: ${JSON.stringify(started.result)}`)
      for (const [what, tool, params, named] of toolCases(path.join(ctx.stateDir, "missing"))) {
        const exit = yield* Effect.exit(callTool(tool, params))
        yield* check(Exit.isSuccess(exit), `${tool} with ${what}: ${describeExit(exit)}, expected a tool error result`)
        const { isFailure, result } = exit.value
        yield* check(isFailure && result._tag === "ToolError", `${tool} with ${what} was accepted: ${JSON.stringify(result).slice(0, 200)}`)
        yield* check(result.message.includes(named), `${tool} with ${what}: the error "${result.message}" does not name ${JSON.stringify(named)}`)
      }
      for (const [what, tool, params] of malformedCases) {
        const exit = yield* Effect.exit(callTool(tool, params))
        yield* check(
          Exit.isFailure(exit) ? Cause.failureOption(exit.cause)._tag === "Some" : exit.value.isFailure,
          `${tool} with ${what}: ${describeExit(exit)}, expected a refusal`
        )
      }
      for (const [what, attempt, expected] of registryCases(registry, "s1", file)) {
        const exit = yield* Effect.exit(attempt)
        yield* check(Exit.isFailure(exit), `registry given ${what}: accepted, expected ${expected}`)
        const error = Cause.failureOption(exit.cause)
        yield* check(error._tag === "Some", `registry given ${what}: ${describeExit(exit)}`)
        yield* check(error.value._tag === expected, `registry given ${what}: ${error.value._tag} (${error.value.message}), expected ${expected}`)
      }
      // after all that, the tools still serve the shell they started
      const read = yield* callTool("bash_output", { shell_id: "s1", wait_for: "ready", wait_timeout: 5000 })
      yield* check(!read.isFailure && read.result.text.startsWith("ready"), `after the bad inputs, bash_output s1 gave ${JSON.stringify(read.result)}`)
    }), layer(ctx))
}

const describeExit = (exit) =>
  Exit.isSuccess(exit)
    ? `returned ${JSON.stringify(exit.value.result).slice(0, 200)}`
    : Cause.failureOption(exit.cause)._tag === "Some"
    ? `failed with ${Cause.pretty(exit.cause).split("\n")[0]}`
    : `crashed: ${Cause.pretty(exit.cause)}`
