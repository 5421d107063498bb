/**
 * Reads a small kernel file (`/proc`, cgroupfs) into one reused buffer.
 * These files report a size of 0, so `readFileSync` allocates 64 KiB for
 * every read; a stop reads hundreds of them, and that garbage was most of
 * its allocation.
 */
import * as fs from "node:fs"
import { outOfDescriptors, withDescriptor } from "./descriptors.js"

const scratch = Buffer.allocUnsafe(4096)

/** The whole file as latin1 (growing past the buffer only for long files); throws as `openSync` does. */
export const readSmall = (path: string): string =>
  withDescriptor(() => {
    const fd = fs.openSync(path, "r")
    try {
      return readFrom(fd, null)
    } finally {
      fs.closeSync(fd)
    }
  })

/** What an open file holds from `start` (or from where it stands, for `null`) to its end. */
const readFrom = (fd: number, start: number | null): string => {
  let length = fs.readSync(fd, scratch, 0, scratch.length, start)
  if (length < scratch.length) return scratch.toString("latin1", 0, length)
  const parts = [Buffer.from(scratch)]
  let position = start === null ? null : start + length
  while ((length = fs.readSync(fd, scratch, 0, scratch.length, position)) > 0) {
    parts.push(Buffer.from(scratch.subarray(0, length)))
    if (position !== null) position += length
  }
  return Buffer.concat(parts).toString("latin1")
}

/**
 * Small kernel files kept open, each read again from its start (`pread`):
 * one syscall a read, where opening and closing one cost five to ten times
 * that on this VM. For what a stop polls; at most `max` are kept, the rest
 * are read as `readSmall` does. A read fails as `readSmall` does (`readOr`
 * gives "" instead); a kept
 * file that fails is closed, and opened afresh on the next read (a cgroup
 * removed and made again under the same name is a new file).
 */
export const makeKeptFiles = (max: number) => {
  const kept = new Map<string, number>()
  const forget = (path: string) => {
    const fd = kept.get(path)
    kept.delete(path)
    if (fd !== undefined) fs.closeSync(fd)
  }
  const read = (path: string): string => {
    let fd = kept.get(path)
    if (fd === undefined) {
      if (kept.size >= max) return readSmall(path)
      fd = openToKeep(path)
      // out of descriptors: read once, through the reserve, and keep nothing
      if (fd === undefined) return readSmall(path)
      kept.set(path, fd)
    }
    try {
      return readFrom(fd, 0)
    } catch (error) {
      forget(path)
      throw error
    }
  }
  const readOr = (path: string): string => {
    try {
      return read(path)
    } catch {
      return ""
    }
  }
  return { read, readOr, close: () => [...kept.keys()].forEach(forget) }
}

/** The file opened, or undefined where no descriptor is left (a kept file must not hold one of the reserve's). */
const openToKeep = (path: string): number | undefined => {
  try {
    return fs.openSync(path, "r")
  } catch (error) {
    if (outOfDescriptors(error)) return undefined
    throw error
  }
}

export type KeptFiles = ReturnType<typeof makeKeptFiles>
