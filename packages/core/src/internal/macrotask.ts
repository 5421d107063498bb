/**
 * Waiting one turn of the event loop, for work that should run after what
 * the current macrotask set off: the callbacks of I/O already done (a pipe's
 * end of file), the caller's own continuation (`Effect.yieldNow` resumes in
 * a microtask, before a promise's `await` does).
 */
import * as Effect from "effect/Effect"

/** Resumes in a `setImmediate` callback: after the I/O callbacks and microtasks already due. */
export const nextMacrotask: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * Calls `f` once `ms` have passed and the I/O due by then has been handled;
 * returns what cancels it. libuv runs due timers before it polls, so a
 * timer that came due while this process was off the CPU (a busy host)
 * fired before an event that was already waiting, a leader's exit, and a
 * wait bounded by it took the event for missing.
 */
export const afterIoDue = (ms: number, f: () => void): () => void => {
  let immediate: NodeJS.Immediate | undefined
  const timer = setTimeout(() => {
    immediate = setImmediate(f)
  }, ms)
  return () => {
    clearTimeout(timer)
    if (immediate !== undefined) clearImmediate(immediate)
  }
}
