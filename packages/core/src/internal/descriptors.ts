/**
 * File descriptors held back for the stop. Every membership read opens one
 * (a `/proc` file, a cgroup's listing, the listing of `/proc` itself, a
 * write to `cgroup.kill`), and a program at its descriptor limit (a leak, a
 * low `ulimit -n`) must still be able to stop its shells: failing there, a
 * cgroup stop read its cell as empty and left the shell running, and a
 * scanned one died. So a few descriptors stay open on `/dev/null`; an open
 * that fails for want of one lets one go, tries again, and takes it back.
 */
import * as fs from "node:fs"

/** Enough for an open, and for one more while the first is taken back. */
const RESERVED = 2

const reserved: Array<number> = []

/** Opens the reserve up to its size, as far as the limit allows now. */
export const reserve = (): void => {
  while (reserved.length < RESERVED) {
    try {
      reserved.push(fs.openSync("/dev/null", "r"))
    } catch {
      return
    }
  }
}

/**
 * Whether `count` descriptors can be opened now besides the reserve, opened
 * on /dev/null and closed at once: undefined if so, else the code the kernel
 * refused one with (EMFILE, ENFILE). An open that fails for another reason
 * is not counted against it.
 */
export const shortOf = (count: number): string | undefined => {
  const held: Array<number> = []
  try {
    while (held.length < count) held.push(fs.openSync("/dev/null", "r"))
    return undefined
  } catch (error) {
    return outOfDescriptors(error) ? (error as NodeJS.ErrnoException).code : undefined
  } finally {
    held.forEach((fd) => fs.closeSync(fd))
  }
}

/** Whether an open failed for want of a descriptor, the process's or the system's. */
export const outOfDescriptors = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException | null)?.code
  return code === "EMFILE" || code === "ENFILE"
}

/**
 * Runs `use`, which opens at most one descriptor and closes it before it
 * returns; where that open fails for want of a descriptor, runs it again
 * with one of the reserve's let go.
 */
export const withDescriptor = <A>(use: () => A): A => {
  if (reserved.length < RESERVED) reserve()
  try {
    return use()
  } catch (error) {
    if (!outOfDescriptors(error) || reserved.length === 0) throw error
    fs.closeSync(reserved.pop()!)
    try {
      return use()
    } finally {
      reserve()
    }
  }
}
