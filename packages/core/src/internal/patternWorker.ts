/**
 * Regular expressions from outside, such as a model's `filter` or `wait_for`,
 * run here: in worker threads, under a time limit. A pattern such as `(a+)+$`
 * can backtrack for minutes over one long line, and nothing stops a RegExp
 * midway but ending its thread. On the thread that serves requests, it would
 * hold up every one of them.
 *
 * A host can make such patterns finish instead of time out: with V8's
 * `--enable-experimental-regexp-engine-on-excessive-backtracks` (set by
 * `corral mcp`), a match that backtracks too much goes on in V8's linear-time
 * engine, where the pattern allows it (no backreferences or lookarounds).
 * Ordinary patterns keep the fast backtracking engine either way.
 */
import { Worker } from "node:worker_threads"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

/** How long one match may run. It is wall-clock time on purpose: it protects the CPU, not a schedule. */
export const TIME_LIMIT_MS = 2_000

/** Workers at once; more callers wait their turn, with no time counted against them. */
const MAX_WORKERS = 2

export interface Request {
  readonly op: "keep" | "any"
  readonly pattern: string
  readonly text: string
}

export type Reply = { readonly value: string | boolean } | { readonly error: string }

/** The match ran past the time limit and its worker was ended. */
export class PatternTimedOut extends Data.TaggedError("PatternTimedOut")<{ readonly ms: number }> {}

/** The worker failed (out of memory, a stack overflow in the pattern). */
export class PatternFailed extends Data.TaggedError("PatternFailed")<{ readonly reason: string }> {}

/** No worker could start: no fault of the pattern's. */
export class PatternWorkerUnavailable extends Data.TaggedError("PatternWorkerUnavailable")<{ readonly reason: string }> {}

/** Why a worker could not start, and what to do where that is known. */
const cannotStart = (error: Error) =>
  new PatternWorkerUnavailable({
    reason: /uv_cwd/.test(error.message)
      ? `Node cannot start the thread that runs patterns in a process whose working directory was removed (${error.message}): start this process from an existing directory`
      : `the thread that runs patterns could not start (${error.message})`
  })

const mainUrl = new URL("./patternWorkerMain.js", import.meta.url)

const permits = Effect.unsafeMakeSemaphore(MAX_WORKERS)
const idle: Array<Worker> = []
/** Workers that were ended, or are being: never handed out again. */
const spent = new WeakSet<Worker>()

const retire = (worker: Worker) => {
  spent.add(worker)
  void worker.terminate()
}

const newWorker = () => {
  // a pattern that eats memory ends its worker, not the process
  const worker = new Worker(mainUrl, { resourceLimits: { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 32 } })
  // an idle worker does not keep the process alive
  worker.unref()
  return worker
}

const start = Effect.async<Worker, PatternWorkerUnavailable>((resume) => {
  const worker = newWorker()
  const onError = (error: Error) => resume(Effect.fail(cannotStart(error)))
  worker.once("error", onError)
  worker.once("online", () => {
    worker.off("error", onError)
    resume(Effect.succeed(worker))
  })
  return Effect.sync(() => retire(worker))
})

let warming = false

/**
 * Starts a worker ahead of the first match. A thread takes tens of
 * milliseconds to start (far more on a loaded machine), and a `waitFor`
 * should not lag the line it waits for by that much.
 */
export const warm: Effect.Effect<void> = Effect.sync(() => {
  if (warming || idle.length > 0) return
  warming = true
  const worker = newWorker()
  worker.once("online", () => {
    warming = false
    idle.push(worker)
  })
  worker.once("error", () => {
    warming = false
    retire(worker)
  })
})

const take = Effect.suspend(() => {
  const worker = idle.pop()
  return worker === undefined ? start : Effect.succeed(worker)
})

const giveBack = (worker: Worker) =>
  Effect.sync(() => {
    if (!spent.has(worker)) idle.push(worker)
  })

const ask = (worker: Worker, request: Request) =>
  Effect.async<string | boolean, PatternTimedOut | PatternFailed>((resume) => {
    const done = () => {
      clearTimeout(timer)
      worker.off("message", onMessage)
      worker.off("error", onError)
    }
    const onMessage = (reply: Reply) => {
      done()
      resume("error" in reply ? Effect.fail(new PatternFailed({ reason: reply.error })) : Effect.succeed(reply.value))
    }
    const onError = (error: Error) => {
      done()
      spent.add(worker)
      resume(Effect.fail(new PatternFailed({ reason: error.message })))
    }
    const timer = setTimeout(() => {
      done()
      retire(worker)
      resume(Effect.fail(new PatternTimedOut({ ms: TIME_LIMIT_MS })))
    }, TIME_LIMIT_MS)
    worker.on("message", onMessage)
    worker.on("error", onError)
    worker.postMessage(request)
    // a caller that stops waiting leaves a worker that may be busy for long: end it
    return Effect.sync(() => {
      done()
      retire(worker)
    })
  })

const run = (request: Request) =>
  permits.withPermits(1)(Effect.acquireUseRelease(take, (worker) => ask(worker, request), giveBack))

/** Why a match gave no answer. */
export type MatchError = PatternTimedOut | PatternFailed | PatternWorkerUnavailable

/** The lines of `text` that match `pattern`, each with its newline. */
export const keepMatching = (pattern: string, text: string): Effect.Effect<string, MatchError> =>
  text === "" ? Effect.succeed("") : Effect.map(run({ op: "keep", pattern, text }), String)

/** Whether any line of `text` matches `pattern`; an empty text has no lines. */
export const anyLineMatches = (pattern: string, text: string): Effect.Effect<boolean, MatchError> =>
  text === "" ? Effect.succeed(false) : Effect.map(run({ op: "any", pattern, text }), Boolean)
