#!/usr/bin/env node
// Runs a command inside a fresh PID namespace when this user may create one.
// The machines corral is built on have a PID 1 that never reaps orphans, so a
// test that kills a group's leader leaves its orphaned members as zombies until
// reboot. Inside a namespace they are reaped when the namespace ends, and the
// command is the namespace's own non-reaping PID 1.
// Sets CORRAL_TEST_PIDNS=1 inside, so tests that orphan on purpose can tell.
import { spawnSync } from "node:child_process"
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
const result = spawnSync(argv[0], argv[1], { stdio: "inherit", env })
process.exit(result.status ?? 1)
