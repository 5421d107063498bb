/**
 * The next tool result after a background shell ends says so, once: for
 * every one of several shells ending together, with the right exit code, and
 * never "finished" while processes of its group still run.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Call } from "./helpers.js"
import { call, inPidNamespace, okText, withTools } from "./helpers.js"

interface Notice {
  readonly shell_id: string
  readonly text: string
  readonly state: string
  readonly exit_code?: number
  readonly unread_lines?: number
  readonly running?: number
}

const noticesOf = (result: Call): ReadonlyArray<Notice> =>
  result.ok ? ((result.metadata.notices ?? []) as ReadonlyArray<Notice>) : []

/** Calls that keep every notice their results carried, and the texts that carried them. */
const tracked = () => {
  const seen: Array<Notice> = []
  const texts: Array<string> = []
  const run = (name: Parameters<typeof call>[0], params: Record<string, unknown>) =>
    Effect.tap(call(name, params), (result) =>
      Effect.sync(() => {
        seen.push(...noticesOf(result))
        texts.push(result.text)
      }))
  /** Foreground calls until `want` notices have come in all. */
  const until = (want: number) =>
    Effect.gen(function*() {
      const deadline = Date.now() + 20_000
      while (seen.length < want && Date.now() < deadline) yield* run("bash", { command: "sleep 0.1" })
    })
  return { seen, texts, run, until }
}

describe.skipIf(!inPidNamespace)("finish notices (needs the PID namespace of npm test)", () => {
  it.live("tells of every one of several shells that end together, once each, with its own exit code", () =>
    withTools(Effect.gen(function*() {
      const t = tracked()
      for (const code of [1, 2, 3, 0]) {
        yield* t.run("bash", { command: `sleep 0.3; exit ${code}`, run_in_background: true })
      }
      yield* t.until(4)
      expect(t.seen.map((n) => [n.shell_id, n.state, n.exit_code]).sort()).toEqual([
        ["s1", "Exited", 1],
        ["s2", "Exited", 2],
        ["s3", "Exited", 3],
        ["s4", "Exited", 0]
      ])
      const all = t.texts.join("\n")
      expect(all).toMatch(/\[notice: shell s1 \(sleep 0\.3; exit 1\) exited with code 1 after [\d.]+m?s; finished: the group is empty; 0 lines unread\]/)
      expect(all).toMatch(/\[notice: shell s3 \(sleep 0\.3; exit 3\) exited with code 3 after/)
      // given once: the next result carries none
      expect(noticesOf(yield* call("bash", { command: "true" }))).toEqual([])
    })))

  it.live("counts the lines not yet read, and says nothing of what a result already states", () =>
    withTools(Effect.gen(function*() {
      const t = tracked()
      yield* t.run("bash", { command: "seq 1 120; sleep 0.5; exit 7", run_in_background: true })
      yield* t.until(1)
      expect(t.seen[0]).toMatchObject({ shell_id: "s1", exit_code: 7, unread_lines: 120 })
      expect(t.seen[0]!.text).toMatch(/exited with code 7 after .*; 120 lines unread$/)
      yield* t.run("bash", { command: "sleep 1; exit 9", run_in_background: true })
      // bash_output on s2 states its end itself: no notice of it follows
      const read = yield* t.run("bash_output", { shell_id: "s2", wait_for: "never", wait_timeout: 10_000 })
      expect(okText(read)).toContain("[status: exited with code 9")
      yield* t.run("bash", { command: "true" })
      expect(t.seen.map((n) => n.shell_id)).toEqual(["s1"])
    })))

  it.live("says the leader exited while processes of its group still run, then that the group is empty", () =>
    withTools(Effect.gen(function*() {
      const t = tracked()
      yield* t.run("bash", { command: "sleep 2.5 & sleep 2.5 & exit 0", run_in_background: true })
      yield* t.until(1)
      expect(t.seen).toMatchObject([{ shell_id: "s1", state: "Lingering", running: 2 }])
      expect(t.texts.join("\n")).toContain(
        "[notice: shell s1 (sleep 2.5 & sleep 2.5 & exit 0): leader exited with code 0; 2 processes of the group still running; 0 lines unread]"
      )
      expect(t.texts.join("\n")).not.toMatch(/finished|completed/)
      yield* t.until(2)
      expect(t.seen[1]).toMatchObject({ shell_id: "s1", state: "Exited", exit_code: 0 })
      expect(t.seen[1]!.text).toMatch(/exited with code 0 after [\d.]+s; finished: the group is empty/)
    })))

  it.live("a shell the caller stopped with kill_bash brings no notice", () =>
    withTools(Effect.gen(function*() {
      const t = tracked()
      yield* t.run("bash", { command: "sleep 30", run_in_background: true })
      yield* t.run("kill_bash", { shell_id: "s1" })
      yield* t.run("bash", { command: "true" })
      expect(t.seen).toEqual([])
    })))
})
