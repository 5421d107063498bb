// Runs a worker batch in a PID namespace of its own, so orphans that die in it
// are reaped (or at least destroyed) when it ends: this machine's own PID 1
// never reaps, and zombies left outside a namespace stay until reboot.
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

export const RESULT_PREFIX = "BENCH_RESULT "

const WORKER = fileURLToPath(new URL("../worker.mjs", import.meta.url))

/**
 * The namespace's PID 1 decides what happens to orphans:
 * - zombie-init: the worker (Node) itself is PID 1. libuv waits only for
 *   children Node spawned, so every orphan that dies stays a zombie.
 * - reaping: bash is PID 1 and runs the worker as its child. While bash waits
 *   for that child it calls waitpid(-1), which reaps every adopted orphan too
 *   (the trailing `exit` keeps bash from exec'ing the worker in its place).
 */
const initArgv = {
  "zombie-init": (argv) => argv,
  reaping: (argv) => ["bash", "-c", "\"$@\"; exit $?", "reaper", ...argv]
}

/** Runs one batch; resolves with the worker's parsed result or rejects with its stderr. */
export const runBatch = (batch, { pid1, timeoutMs }) =>
  new Promise((resolve, reject) => {
    const worker = [process.execPath, "--expose-gc", WORKER, JSON.stringify(batch)]
    const child = spawn("unshare", ["--pid", "--fork", "--mount-proc", "--kill-child", ...initArgv[pid1](worker)], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (b) => (stdout += b))
    child.stderr.on("data", (b) => (stderr += b))
    // --kill-child: the namespace, and everything in it, dies with unshare
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      const line = stdout.split("\n").find((l) => l.startsWith(RESULT_PREFIX))
      if (code === 0 && line !== undefined) return resolve(JSON.parse(line.slice(RESULT_PREFIX.length)))
      const why = signal === "SIGKILL" ? `no result within ${timeoutMs} ms` : `exit ${code ?? signal}`
      reject(new Error(`${batch.id} / ${batch.impl}: ${why}\n${stderr.trim()}`))
    })
  })
