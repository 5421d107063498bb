/**
 * The PID-namespace init's report channel for a shell on a terminal. On
 * pipes the init reports on fd 3, a pipe the spawn hands it; the pty package
 * hands its child no descriptor but the terminal, so there the init connects
 * to a unix socket instead, whose path it is given: in a directory of its
 * own (0700, from mkdtemp), the socket itself 0600. The first connection is
 * the init's (it connects before it forks the command): the listener closes
 * and the directory goes at once, so no other process can connect after it.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"

export interface ReportSocket {
  /** Where the init connects. */
  readonly path: string
  /** Stops listening and reading, and removes the directory. */
  readonly close: () => void
}

/** `sun_path` holds 108 bytes with the terminating NUL. */
const MAX_PATH_BYTES = 107

const remove = (dir: string) => {
  try {
    fs.rmSync(dir, { recursive: true, force: true })
  } catch {
    // a temporary directory left behind is no failure of the shell
  }
}

/**
 * A socket that hands what the init writes to `onData`; undefined (with a
 * warning) where none can be made, and the shell then goes without a report
 * (its status comes when its namespace empties, as its init's).
 */
export const listen = (onData: (chunk: Buffer) => void): Effect.Effect<ReportSocket | undefined> =>
  Effect.async<ReportSocket | undefined>((resume) => {
    const unavailable = (reason: string) => {
      process.emitWarning(`corral: no report socket for a shell on a terminal (${reason}): its exit status comes when its PID namespace is empty`)
      resume(Effect.succeed(undefined))
    }
    let dir: string
    try {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-report-"))
    } catch (error) {
      return unavailable((error as Error).message)
    }
    const socketPath = path.join(dir, "init")
    if (Buffer.byteLength(socketPath) > MAX_PATH_BYTES) {
      remove(dir)
      return unavailable(`${socketPath} is longer than a unix socket path can be: set TMPDIR to a shorter directory`)
    }
    let connection: net.Socket | undefined
    const server = net.createServer((socket) => {
      if (connection !== undefined) return socket.destroy()
      connection = socket
      server.close()
      remove(dir)
      // the init gone before the supervisor read it all is no failure to report
      socket.on("error", () => undefined)
      socket.on("data", onData)
    })
    const close = () => {
      server.close()
      connection?.destroy()
      remove(dir)
    }
    const failed = (error: Error) => {
      close()
      unavailable(error.message)
    }
    server.once("error", failed)
    server.listen(socketPath, () => {
      server.off("error", failed)
      server.on("error", () => undefined)
      try {
        // the 0700 directory kept everyone else away until now
        fs.chmodSync(socketPath, 0o600)
      } catch (error) {
        close()
        return unavailable((error as Error).message)
      }
      resume(Effect.succeed({ path: socketPath, close }))
    })
  })
