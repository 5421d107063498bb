/**
 * Node itself as PID 1, as in a container whose entrypoint is a Node program:
 * the fixture runs in a PID namespace of its own and stops a group whose
 * members die into zombies that Node never reaps. Nothing escapes: when the
 * fixture (the namespace's PID 1) exits, the kernel ends the namespace.
 */
import { execFile, spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { StopReport } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const fixture = fileURLToPath(new URL("./fixtures/zombies-under-node-init.mjs", import.meta.url))

// Creating a PID namespace needs unshare(1) and root, or else a user namespace of one's own, as the pidns backend makes
const unshareArgs = [...(process.getuid?.() === 0 ? [] : ["--user", "--map-current-user"]), "--pid", "--fork", "--mount-proc"]
const canUnshare = spawnSync("unshare", [...unshareArgs, "true"], { stdio: "ignore" }).status === 0
// the zombies must be Node's, as PID 1: not an init's of corral's, as a pidns shell's (auto's pick where no cgroup is
// writable) and a procScan shell's on Linux have: procScan with the command as its leader then
const fixtureEnv = process.getuid?.() === 0 ? process.env : { ...process.env, ZOMBIE_FIXTURE_BARE: "1" }

/** The fixture's last line. */
const FixtureResult = Schema.Struct({
  pid: Schema.Number,
  report: StopReport,
  elapsedMs: Schema.Number,
  session: Schema.Array(Schema.Struct({ pid: Schema.Number, state: Schema.String, ppid: Schema.Number }))
})

const decodeResult = Schema.decodeUnknownEither(Schema.parseJson(FixtureResult))

const runFixture = Effect.async<typeof FixtureResult.Type, Error>((resume) => {
  execFile("unshare", [...unshareArgs, process.execPath, fixture], { timeout: 20_000, env: fixtureEnv }, (error, stdout, stderr) => {
    if (error) return resume(Effect.fail(new Error(`fixture failed: ${error.message}\n${stderr}`)))
    resume(Effect.mapError(decodeResult(stdout.trim().split("\n").at(-1)!), (e) => new Error(`${e.message}: ${stdout}`)))
  })
})

describe("ProcessGroup under Node as PID 1 (needs unshare, and root or user namespaces)", () => {
  it.live.skipIf(!canUnshare)("stops a group that dies into unreaped zombies without waiting for the grace", () =>
    Effect.gen(function*() {
      const result = yield* runFixture
      expect(result.pid).toBe(1)
      // grace is 5 s: a stop that counted zombies as members would take 6 s
      expect(result.elapsedMs).toBeLessThan(2_000)
      expect(result.report).toMatchObject({
        escalated: false,
        survivors: [],
        escaped: [],
        signals: { SIGKILL: 0 }
      })
      // one to the group; each trap's `sleep 0.2`, born after it, may be found and get one of its own
      expect(result.report.signals.SIGTERM).toBeGreaterThanOrEqual(1)
      expect(result.report.members).toBeGreaterThanOrEqual(4)
      // the three subshells are still there, as zombies of PID 1
      expect(result.session.length).toBeGreaterThanOrEqual(3)
      expect(result.session.every((p) => p.state === "Z" && p.ppid === 1)).toBe(true)
    }))
})
