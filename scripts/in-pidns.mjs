#!/usr/bin/env node
// Runs a command inside a fresh PID namespace when this user may create one.
// The machines corral is built on have a PID 1 that never reaps orphans, so a
// test that kills a group's leader leaves its orphaned members as zombies until
// reboot. Inside a namespace they are reaped when the namespace ends, and the
// command is the namespace's own non-reaping PID 1.
// Sets CORRAL_TEST_PIDNS=1 inside, so tests that orphan on purpose can tell.
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { constants } from "node:os"
import { pidnsFlags } from "./pidns-flags.mjs"

const [cmd, ...args] = process.argv.slice(2)
if (!cmd) {
  console.error("usage: node scripts/in-pidns.mjs CMD [ARGS...]")
  process.exit(125)
}
const flavour = process.env.CORRAL_TEST_PIDNS === "1" ? undefined : pidnsFlags()
const canNamespace = flavour !== undefined
const env = { ...process.env, CORRAL_TEST_PIDNS: canNamespace ? "1" : (process.env.CORRAL_TEST_PIDNS ?? "0") }
if (!canNamespace && env.CORRAL_TEST_PIDNS !== "1") {
  console.error("in-pidns: cannot create a PID namespace (needs unshare, and root or unprivileged user namespaces); tests that orphan processes will be skipped")
}
const argv = canNamespace ? ["unshare", [...flavour, "--kill-child", cmd, ...args]] : [cmd, args]
const child = spawn(argv[0], argv[1], { stdio: "inherit", env })
// A signal meant for the run (a CI job's timeout) must end it, not only this wrapper: an orphaned
// `unshare` would go on running the command. `unshare` blocks SIGTERM while it waits, and the
// namespace's init ignores a signal from outside that it has no handler for, so the namespace is
// ended whole: its init SIGKILLed, which kills everything inside, and `unshare`, its parent, reaps
// it and exits. Killing `unshare` first would orphan the init's zombie to a PID 1 that may never
// reap it. Without a namespace, the command gets the signal. (Ctrl-C reaches the whole foreground group.)
const namespaceInit = () => {
  try {
    const [first] = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(" ")
    return Number(first) > 1 ? Number(first) : undefined
  } catch {
    return undefined
  }
}
let endedBy
const end = (signal) => {
  endedBy = signal
  const init = canNamespace ? namespaceInit() : undefined
  if (init !== undefined) process.kill(init, "SIGKILL")
  else child.kill(signal)
}
for (const signal of ["SIGTERM", "SIGHUP"]) process.on(signal, () => end(signal))
child.on("error", (error) => {
  console.error(`in-pidns: could not run ${argv[0]}: ${error.message}`)
  process.exit(127)
})
// ended by a signal, the run says so as a shell would, whatever `unshare` made of its init's death
child.on("exit", (code, signal) => process.exit(endedBy !== undefined || code === null ? 128 + constants.signals[endedBy ?? signal] : code))
