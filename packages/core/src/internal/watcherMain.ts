/**
 * The watcher: a small process in its own session whose stdin is a pipe only
 * the supervisor writes. The supervisor announces each group it starts and
 * ends; EOF means the supervisor is gone, however it died, and every group
 * still announced is stopped with the supervisor's own TERM, grace, KILL
 * policy. It never learns of, and so never signals, any other group.
 *
 * One starts beside every `corral run`, on the supervisor's critical path
 * when CPUs are few, so it loads nothing but Node's own modules until a
 * group has been announced for `PRELOAD_AFTER_MS`: then the stop code
 * (effect, the schemas: `watcherStop.ts`) loads, and a death of the
 * supervisor is acted on at once. `corral run -- true` is over before that.
 */
import * as fs from "node:fs"

/** How long a group is announced before the stop code loads ahead of need; a death sooner loads it at EOF. */
const PRELOAD_AFTER_MS = 50

/** What the supervisor announced and has not withdrawn, by key, as it sent it: checked against the schema when a stop is due. */
const targets = new Map<string, unknown>()
let pending = ""

let stopCode: Promise<typeof import("./watcherStop.js")> | undefined
let preload: NodeJS.Timeout | undefined

const loadStopCode = () => {
  if (stopCode !== undefined) return stopCode
  stopCode = import("./watcherStop.js")
  // stdout tells the supervisor once the stop code is in: from then on a stop starts at once
  void stopCode.then(() => {
    try {
      fs.writeSync(1, "ready\n")
    } catch {
      // no one reads it (the supervisor died meanwhile, or did not ask): nothing to tell
    }
  })
  return stopCode
}

/** Loads the stop code once some group has stayed announced `PRELOAD_AFTER_MS`. */
const schedulePreload = () => {
  if (stopCode !== undefined) return
  if (targets.size === 0) {
    clearTimeout(preload)
    preload = undefined
  } else {
    preload ??= setTimeout(loadStopCode, PRELOAD_AFTER_MS)
  }
}

// a terminal's signals or a closing session must not take the watcher early, nor a stray user signal (`pkill -USR2
// node`). Without a listener, SIGUSR1 makes Node open its inspector on 127.0.0.1:9229, where any local user may
// run code in this process
for (const signal of ["SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE", "SIGUSR1", "SIGUSR2"] as const) process.on(signal, () => {})

/** Applies one line; a line that is not an add or a remove is skipped, and the others are still watched. */
const apply = (line: string) => {
  let message: { op?: unknown; key?: unknown; target?: unknown }
  try {
    message = JSON.parse(line)
  } catch {
    return
  }
  if (typeof message !== "object" || message === null || typeof message.key !== "string") return
  if (message.op === "add") targets.set(message.key, message.target)
  else if (message.op === "remove") targets.delete(message.key)
}

process.stdin.setEncoding("utf8")
process.stdin.on("data", (text: string) => {
  const lines = (pending + text).split("\n")
  pending = lines.pop()!
  for (const line of lines) if (line !== "") apply(line)
  schedulePreload()
})
process.stdin.on("end", async () => {
  clearTimeout(preload)
  if (targets.size === 0) process.exit(0)
  try {
    const { stopAnnounced } = await loadStopCode()
    await stopAnnounced([...targets.values()], process.argv[2])
  } finally {
    process.exit(0)
  }
})
