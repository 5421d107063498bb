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
