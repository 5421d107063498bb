/**
 * The watcher: a small process in its own session whose stdin is a pipe only
 * the supervisor writes. The supervisor announces each group it starts and
 * ends; EOF means the supervisor is gone, however it died, and every group
 * still announced is stopped with the supervisor's own TERM, grace, KILL
 * policy. It never learns of, and so never signals, any other group.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { StopTarget } from "../GroupStop.js"

// Reading stdin starts at once; the stop code loads meanwhile, and a clean
// shutdown (EOF with nothing announced) exits without waiting for it.
const stopCode = Promise.all([
  import("effect/Duration"),
  import("effect/Effect"),
  import("effect/Layer"),
  import("../GroupStop.js"),
  import("../Limits.js"),
  import("../ProcessTable.js"),
  import("./cgroup.js")
])

// the supervisor's lines are decoded with the schema it encodes them with, once it is loaded; until then they wait in order
const decoding = import("./watcherMessage.js")
let decoded: Promise<unknown> = decoding

// stdout tells the supervisor once the stop code is in: from then on a stop starts at once
void stopCode.then(() => {
  try {
    fs.writeSync(1, "ready\n")
  } catch {
    // no one reads it (the supervisor died meanwhile, or did not ask): nothing to tell
  }
})

const targets = new Map<string, StopTarget>()
let pending = ""

// a terminal's signals or a closing session must not take the watcher early
for (const signal of ["SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE"] as const) process.on(signal, () => {})

process.stdin.setEncoding("utf8")
process.stdin.on("data", (text: string) => {
  const lines = (pending + text).split("\n")
  pending = lines.pop()!
  decoded = Promise.all([decoding, decoded]).then(([{ decodeMessage }]) => {
    for (const line of lines) {
      if (line === "") continue
      const message = decodeMessage(line)
      if (message._tag === "None") continue
      if (message.value.op === "add") targets.set(message.value.key, message.value.target)
      else targets.delete(message.value.key)
    }
  })
})
process.stdin.on("end", async () => {
  await decoded
  if (targets.size === 0) process.exit(0)
  const [[Duration, Effect, Layer, { stopGroups }, { defaults, Limits }, { ProcessTable }, Cgroup], { decodeLimits }] = await Promise.all([
    stopCode,
    decoding
  ])
  const limits = decodeLimits(process.argv[2])
  const layer = Layer.mergeAll(
    ProcessTable.layer,
    limits._tag === "None" ? Limits.layerWith(defaults) : Limits.layerWith({
      grace: Duration.millis(limits.value.grace),
      killTimeout: Duration.millis(limits.value.killTimeout),
      killInterval: Duration.millis(limits.value.killInterval)
    })
  )
  await Effect.runPromise(Effect.provide(stopGroups([...targets.values()]), layer))
    .then(() => removeCgroups(Cgroup.remove))
    .finally(() => process.exit(0))
})

/**
 * The emptied shells' cgroups, then their supervisor's own parent cgroup:
 * no one else would remove them when the supervisor's PID namespace ends
 * with it. Only empty cgroups go; rmdir refuses a populated one.
 */
const removeCgroups = (remove: (dir: string) => boolean) => {
  const parents = new Set<string>()
  for (const { cgroup } of targets.values()) {
    if (cgroup === undefined) continue
    remove(cgroup)
    parents.add(path.dirname(cgroup))
  }
  for (const parent of parents) if (path.basename(parent).startsWith("corral-")) remove(parent)
}
