/**
 * Every tool's contract is closed and every bad input is a tool error that
 * names the parameter and the fix, through the toolkit as a language model
 * host calls it: never an `AiError` that ends the model's turn.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as ShellTools from "@corral/tools/ShellTools"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as JsonSchema from "effect/JSONSchema"
import * as Stream from "effect/Stream"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

describe("the tools' input schemas", () => {
  const byName = Object.fromEntries(ShellTools.toolDefinitions().map((d) => [d.name, d.parameters as JsonSchema.JsonSchema7Object]))

  it("are closed objects, each parameter typed and described", () => {
    for (const [name, schema] of Object.entries(byName)) {
      expect(schema, name).toMatchObject({ type: "object", additionalProperties: false })
      for (const [key, property] of Object.entries(schema.properties ?? {})) {
        expect(property, `${name}.${key}`).toHaveProperty("type")
        expect(property, `${name}.${key}`).toHaveProperty("description")
      }
    }
  })

  it("mark what is required, with bash_id an alias of shell_id", () => {
    expect(byName.bash!.required).toEqual(["command"])
    expect(byName.bash_output!.required).toEqual(["shell_id"])
    expect(byName.bash_output!.properties!.bash_id).toMatchObject({ description: expect.stringContaining("in place of shell_id") })
    expect(byName.kill_bash!.required).toEqual(["shell_id"])
    expect(byName.list_shells).toEqual({ type: "object", required: [], properties: {}, additionalProperties: false })
  })

  it("state their bounds", () => {
    expect(byName.bash!.properties!.timeout).toMatchObject({ type: "integer", minimum: 1, maximum: ShellTools.MAX_TIMEOUT_MS })
    expect(byName.bash_output!.properties!.tail_lines).toMatchObject({ type: "integer", minimum: 1, maximum: ShellTools.MAX_TAIL_LINES })
    expect(byName.bash_output!.properties!.wait_timeout).toMatchObject({ type: "integer", minimum: 0, maximum: ShellTools.MAX_WAIT_MS })
  })
})

describe.skipIf(!inPidNamespace)("bad input through the toolkit (needs the PID namespace of npm test)", () => {
  const cases: ReadonlyArray<readonly [keyof ShellTools.Tools, Record<string, unknown>, string]> = [
    ["kill_bash", {}, "invalid arguments for kill_bash: shell_id is missing: the id bash returned for the background shell, such as s1. kill_bash takes shell_id (required)."],
    ["kill_bash", { shell_id: 7 }, "invalid arguments for kill_bash: shell_id must be a string; got 7. kill_bash takes shell_id (required)."],
    ["bash", { command: "ls", Timeout: 5 }, `invalid arguments for bash: unknown parameter "Timeout" (did you mean timeout?). bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows.`],
    ["bash", { command: "ls", run_in_background: "yes" }, `invalid arguments for bash: run_in_background must be a boolean; got "yes". bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows.`],
    ["bash", { cmd: "ls" }, `invalid arguments for bash: unknown parameter "cmd"; command is missing: the command line to run with bash -c. Quote paths that contain spaces. bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows.`],
    ["bash_output", { "shell-id": "s1" }, `invalid arguments for bash_output: unknown parameter "shell-id" (did you mean shell_id?). bash_output takes shell_id (required), bash_id, tail_lines, filter, wait_for, wait_timeout.`],
    ["bash_output", { shell_id: "s1", tail_lines: 10_001 }, "tail_lines 10001 is over the maximum of 10000: a result carries 30000 characters at most, so ask for fewer lines, or narrow them with filter"],
    ["list_shells", { verbose: true }, `invalid arguments for list_shells: unknown parameter "verbose". list_shells takes no parameters: call it with {}.`],
    ["bash", { a: 1, b: 2, c: 3, d: 4, command: "ls" }, `invalid arguments for bash: unknown parameter "a"; unknown parameter "b"; unknown parameter "c"; and 1 more. bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows.`]
  ]
  for (const [tool, params, message] of cases) {
    it.live(`${tool} ${JSON.stringify(params)}`, () =>
      withTools(Effect.gen(function*() {
        expect(yield* call(tool, params)).toEqual({ ok: false, reason: "InvalidInput", text: message })
      })))
  }

  // the message of a decode that refuses a value describes it, recursing as deep: 3000 levels overflowed the stack there
  it.live("arguments nested thousands of levels deep are a one-line tool error, not a stack overflow", () =>
    withTools(Effect.gen(function*() {
      let nested: unknown = "ls"
      for (let i = 0; i < 3000; i++) nested = [nested]
      expect(yield* call("bash", { command: nested })).toEqual({
        ok: false,
        reason: "InvalidInput",
        text: "invalid arguments for bash: they nest values over 16 levels deep. bash takes command (required), workdir, timeout, run_in_background, yield_ms, description, tty, cols, rows."
      })
    })))

  it.live("a model's bad calls come back to it as tool errors, and the turn goes on", () =>
    withTools(Effect.gen(function*() {
      const model = yield* LanguageModel.make({
        generateText: () =>
          Effect.succeed([
            { type: "tool-call", id: "call-1", name: "kill_bash", params: {} },
            { type: "tool-call", id: "call-2", name: "bash", params: { command: "echo ran", timeout: "soon" } },
            { type: "tool-call", id: "call-3", name: "bash", params: { command: "echo ran" } }
          ]),
        streamText: () => Stream.empty
      })
      const response = yield* LanguageModel.generateText({ prompt: "go", toolkit: ShellTools.toolkit }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, model)
      )
      expect(response.toolResults.map((r) => ({ name: r.name, isFailure: r.isFailure, result: r.result }))).toMatchObject([
        { name: "kill_bash", isFailure: true, result: { _tag: "ToolError", reason: "InvalidInput", message: expect.stringContaining("shell_id is missing") } },
        { name: "bash", isFailure: true, result: { reason: "InvalidInput", message: expect.stringContaining(`timeout must be an integer; got "soon"`) } },
        { name: "bash", isFailure: false, result: { text: expect.stringMatching(/^ran\n/) } }
      ])
    })))

  it.live("bash_id stands in for shell_id", () =>
    withTools(Effect.gen(function*() {
      yield* call("bash", { command: "echo aliased", run_in_background: true })
      expect(okText(yield* call("bash_output", { bash_id: "s1", wait_for: "aliased" }))).toMatch(/^aliased\n/)
    })))
})
