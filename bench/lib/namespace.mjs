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

const workerArgv = (batch) => [process.execPath, "--expose-gc", WORKER, JSON.stringify(batch)]

/** Runs one batch; resolves with the worker's parsed result or rejects with its stderr. */
export const runBatch = (batch, { pid1, timeoutMs }) =>
  collect(
    spawn("unshare", ["--pid", "--fork", "--mount-proc", "--kill-child", ...initArgv[pid1](workerArgv(batch))], {
      stdio: ["ignore", "pipe", "pipe"]
    }),
    batch,
    timeoutMs
  )

/** From inside a batch: runs `batch` in a fresh worker process in the same namespace, with `env` added to its environment. */
export const runProbe = (batch, { timeoutMs = 60_000, env = {} } = {}) => {
  const [node, ...args] = workerArgv(batch)
  return collect(spawn(node, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } }), batch, timeoutMs)
}

const collect = (child, batch, timeoutMs) =>
  new Promise((resolve, reject) => {
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (b) => (stdout += b))
    child.stderr.on("data", (b) => (stderr += b))
    // a batch's namespace, and everything in it, dies with unshare (--kill-child);
    // what a killed probe leaves dies with its batch's namespace
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
