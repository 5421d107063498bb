/**
 * Reads a small kernel file (`/proc`, cgroupfs) into one reused buffer.
 * These files report a size of 0, so `readFileSync` allocates 64 KiB for
 * every read; a stop reads hundreds of them, and that garbage was most of
 * its allocation.
 */
import * as fs from "node:fs"

const scratch = Buffer.allocUnsafe(4096)

/** The whole file as latin1 (growing past the buffer only for long files); throws as `openSync` does. */
export const readSmall = (path: string): string => {
  const fd = fs.openSync(path, "r")
  try {
    let length = fs.readSync(fd, scratch, 0, scratch.length, null)
    if (length < scratch.length) return scratch.toString("latin1", 0, length)
    const parts = [Buffer.from(scratch)]
    while ((length = fs.readSync(fd, scratch, 0, scratch.length, null)) > 0) parts.push(Buffer.from(scratch.subarray(0, length)))
    return Buffer.concat(parts).toString("latin1")
  } finally {
    fs.closeSync(fd)
  }
}
