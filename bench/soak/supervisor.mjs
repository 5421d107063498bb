// A supervisor for the soak to SIGKILL: a registry (crash safety on) with live
// shells of every kind, on the containment backend named by its second
// argument (auto when absent). Prints one JSON line once they are all running, then waits.
import * as Effect from "effect/Effect"
import { start, waitForMembers, withRegistry } from "./lib/harness.mjs"

export const SHELLS = [
  { command: "sleep 60 & sleep 60 & wait", members: 3 },
  { command: "trap '' TERM; sleep 60 & sleep 60 & wait", members: 3 },
  { command: "set -m; sleep 50 & wait", shell: "/bin/bash", members: 2 },
  { command: "trap '' TERM; setsid sleep 60 & sleep 60", members: 3 }
]

const main = (stateDir, backend) =>
  withRegistry({ stateDir, backend }, Effect.gen(function*() {
    const shells = yield* Effect.forEach(SHELLS, ({ command, shell }) => start(command, { shell }))
    yield* Effect.forEach(shells, (shell, i) => waitForMembers(shell, SHELLS[i].members))
    process.stdout.write(JSON.stringify({ shells }) + "\n")
    return yield* Effect.never
  }))

if (import.meta.url === `file://${process.argv[1]}`) Effect.runFork(main(process.argv[2], process.argv[3]))
