// A process that leaves the session (setsid) and strips its environment,
// CORRAL_SHELL_ID included (env -i), while its parent still lives: neither
// group, session nor tag says it is the shell's; only its cgroup, or the
// descendant tree, does. Stopped once through the registry and once through
// ProcessGroup; the soak finds it by the token in its argv.
import { ProcessGroup } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Kernel from "../lib/kernel.mjs"
import { check, killConfirmed, markedToken, start, staysGone, waitFor, withContainment, withRegistry } from "../lib/harness.mjs"

const command = (token) => `setsid env -i sh -c 'sleep 6${token}' & sleep 600 & wait`

/** The escaper once it is out: another session, and no CORRAL_SHELL_ID left in its environment. */
const awaitEscaper = (leader, token) =>
  waitFor(`the escaper (sleep 6${token}) out of session ${leader} and without its tag`, () =>
    Kernel.liveMarked([token]).find((p) =>
      p.sid !== leader && Kernel.commandLine(p.pid).includes(`sleep 6${token}`) && Kernel.shellIdOf(p.pid) === undefined
    ))

const viaRegistry = (ctx) =>
  withRegistry(ctx, Effect.scoped(Effect.gen(function*() {
    const token = yield* markedToken(ctx)
    ctx.phase = "registry: start"
    const shell = yield* start(command(token))
    yield* check(shell.containment === ctx.backend, `shell ${shell.id} is held by ${shell.containment}, not ${ctx.backend}`)
    ctx.phase = "registry: waiting for the escaper"
    yield* awaitEscaper(shell.pid, token)
    ctx.phase = "registry: kill"
    const report = yield* killConfirmed(shell, [token])
    yield* check(report.containment === ctx.backend, `the stop of ${shell.id} ran on ${report.containment}, not ${ctx.backend}`)
    yield* staysGone(`after the registry's stop of ${shell.id}`, token)
    ctx.record("registry stop ms", report.durationMs)
    ctx.record("registry stop escalated", report.escalated ? 1 : 0)
    ctx.phase = "registry: closing the registry"
  })))

const viaGroup = (ctx) =>
  withContainment(ctx, Effect.gen(function*() {
    const token = yield* markedToken(ctx)
    ctx.phase = "group: spawn"
    const group = yield* ProcessGroup.spawn({ command: command(token) })
    yield* check(group.containment === ctx.backend, `group ${group.pid} is held by ${group.containment}, not ${ctx.backend}`)
    ctx.phase = "group: waiting for the escaper"
    yield* awaitEscaper(group.pid, token)
    ctx.phase = "group: group.stop()"
    const report = yield* group.stop()
    const live = Kernel.liveMembers({ pid: group.pid, tag: group.shellId }, [token])
    yield* check(live.length === 0, `group.stop() of ${group.pid} returned while ${live.length} of its processes were alive: ${live.map(Kernel.describe).join("; ")}`)
    yield* check(report.survivors.length === 0, `the stop of group ${group.pid} reported survivors ${report.survivors.join(", ")}`)
    yield* staysGone(`after group.stop() of ${group.pid}`, token)
    ctx.record("group stop ms", report.durationMs)
    ctx.record("group stop escalated", report.escalated ? 1 : 0)
    ctx.phase = "group: closing the scope"
  }))

export default {
  id: "escaper",
  summary: "setsid env -i sh -c 'sleep 6<token>' & sleep 600 & wait: stopped by the registry, then by ProcessGroup",
  orphans: true,
  run: (ctx) => Effect.zipRight(viaRegistry(ctx), viaGroup(ctx))
}
