/**
 * A pseudo-terminal for a group that needs one (`tty: true`), from the
 * optional package `@lydell/node-pty` (prebuilt binaries), or `node-pty`
 * where that is what is installed. Loaded on the first tty spawn only: a
 * supervisor that never asks for a terminal never loads a native module.
 *
 * The child is forked by the package's native code with `forkpty`: a new
 * session whose controlling terminal is the pty, so its pid is its group and
 * session id, as with `detached: true`, and every stop of corral applies.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as Effect from "effect/Effect"

/** The packages tried, in order; the first is the one corral asks you to install. */
export const packages = ["@lydell/node-pty", "node-pty"] as const

/** The part of node-pty's `IPty` corral uses. */
export interface Pty {
  readonly pid: number
  readonly onData: (listener: (data: Buffer | string) => void) => unknown
  readonly onExit: (listener: (event: { readonly exitCode: number; readonly signal?: number | undefined }) => void) => { readonly dispose: () => void }
  readonly write: (data: string | Buffer) => void
  readonly resize: (cols: number, rows: number) => void
}

interface PtyModule {
  readonly spawn: (file: string, args: ReadonlyArray<string>, options: {
    readonly cols: number
    readonly rows: number
    readonly cwd?: string | undefined
    readonly env: Readonly<Record<string, string | undefined>>
    readonly encoding: null
    readonly name: string
  }) => Pty
}

let loaded: Promise<PtyModule> | undefined

/** Why no package could be loaded, by package. */
export class Missing extends Error {
  constructor(readonly reasons: ReadonlyArray<string>) {
    super(reasons.join("; "))
  }
}

const requireHere = createRequire(import.meta.url)

const tryLoad = async (): Promise<PtyModule> => {
  const reasons: Array<string> = []
  for (const name of packages) {
    try {
      // required, not imported: a CommonJS package with a native addon, resolved from corral's own location
      const module = requireHere(name) as PtyModule
      if (typeof module.spawn === "function") return module
      reasons.push(`${name} has no spawn function`)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      reasons.push(code === "MODULE_NOT_FOUND" && String((error as Error).message).includes(`'${name}'`)
        ? `${name} is not installed`
        : `${name} cannot be loaded: ${String((error as Error).message).split("\n")[0]}`)
    }
  }
  throw new Missing(reasons)
}

/** The pty package, loaded once; fails with why none could be. */
export const load: Effect.Effect<PtyModule, Missing> = Effect.tryPromise({
  try: () => (loaded ??= tryLoad().catch((error) => {
    // a later call tries again: the package may have been installed meanwhile
    loaded = undefined
    throw error
  })),
  catch: (error) => (error instanceof Missing ? error : new Missing([String(error)]))
})


/**
 * Ends reading the pty's master, where node-pty has no public way to do so
 * without also signalling the pid it forked (which corral may no longer own:
 * the leader is reaped by then, and its pid may be someone else's).
 */
export const closeMaster = (pty: Pty): void => {
  const socket = (pty as unknown as { readonly _socket?: { destroy(): void } })._socket
  socket?.destroy()
}

/** Called when the master closes (every holder of the terminal closed it, or it was hung up). */
export const onClose = (pty: Pty, listener: () => void): void => {
  const emitter = pty as unknown as { once?: (event: "close", listener: () => void) => void }
  emitter.once?.("close", listener)
}

/** The most `readRest` reads: a holder writing on as the reader closes is cut off, as it would have been a moment later. */
const MAX_REST_BYTES = 1024 * 1024

/**
 * Calls `f` once, just before the master's reader is destroyed: while its
 * descriptor is still open, so `readRest` can read it, and a tick before
 * the `close` event, where a resize would already fail with EBADF. node-pty
 * destroys it at end of file, at `closeMaster`, or 200 ms after the
 * leader's exit, whatever the terminal still holds then; it has no hook
 * for that moment.
 */
export const onClosing = (pty: Pty, f: () => void): void => {
  const socket = (pty as unknown as { readonly _socket?: { destroy: (...args: Array<unknown>) => unknown } })._socket
  if (socket === undefined) return
  const destroy = socket.destroy
  socket.destroy = function(this: unknown, ...args) {
    socket.destroy = destroy
    try {
      f()
    } finally {
      destroy.apply(this, args)
    }
    return this
  }
}

/**
 * Reads what the terminal holds now, until it has nothing (EAGAIN), ends
 * (EIO once its last holder closed it) or gave MAX_REST_BYTES: Node drops
 * what it has not read when the reader is destroyed, and a supervisor kept
 * off the CPU past node-pty's 200 ms, on a busy host, lost the last lines
 * its command wrote before it exited. libuv holds the master non-blocking,
 * so this never waits.
 */
export const readRest = (pty: Pty, onData: (data: Buffer) => void): void => {
  const fd = (pty as unknown as { readonly _fd?: number })._fd
  if (fd === undefined) return
  const buffer = Buffer.allocUnsafe(64 * 1024)
  for (let total = 0; total < MAX_REST_BYTES;) {
    let n: number
    try {
      n = fs.readSync(fd, buffer)
    } catch {
      return
    }
    if (n === 0) return
    onData(Buffer.from(buffer.subarray(0, n)))
    total += n
  }
}
