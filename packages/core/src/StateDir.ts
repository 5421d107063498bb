/**
 * Where supervisors keep their journals and control sockets: private to the
 * user (0700), and overridable for tests and containers.
 *
 * corral often runs as root, and many agents share this directory, so
 * nothing found in it is trusted: the directory must be a real directory
 * (not a link) owned by this user, and every file is opened without
 * following links and read only if it is a regular file of this user.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { currentDirectory } from "./internal/currentDirectory.js"

/** The state directory cannot be used: it names the directory, what is wrong, and the override. */
export class StateDirError extends Data.TaggedError("StateDirError")<{
  readonly path: string
  readonly reason: string
}> {
  override get message() {
    return `cannot use the state directory ${this.path}: ${this.reason}. ` +
      "Set CORRAL_STATE_DIR to a writable directory of your own"
  }
}

/** The user corral runs as; files of anyone else are refused. */
export const ownUid = (): number => process.getuid?.() ?? 0

/** `CORRAL_STATE_DIR`, else `$XDG_STATE_HOME/corral`, else `~/.local/state/corral`. */
export const resolve: Effect.Effect<string> = Effect.gen(function*() {
  const explicit = yield* Config.option(Config.string("CORRAL_STATE_DIR"))
  if (Option.isSome(explicit)) return path.resolve(currentDirectory(), explicit.value)
  const xdg = yield* Config.option(Config.string("XDG_STATE_HOME"))
  return path.join(Option.getOrElse(xdg, () => path.join(os.homedir(), ".local", "state")), "corral")
}).pipe(Effect.orDie)

/**
 * Where readers of every supervisor (`corral ls`, `show`, `logs`, `stop`,
 * `top`) look: the state directory, and also `~/.local/state/corral` where
 * XDG_STATE_HOME moves the first elsewhere, unless CORRAL_STATE_DIR names
 * the one directory. An MCP client starts its servers with a short
 * environment (the MCP SDK's default: HOME, LOGNAME, PATH, SHELL, TERM and
 * USER), so such a supervisor keeps its state under HOME whatever the
 * user's own shell sets.
 */
export const searched: Effect.Effect<ReadonlyArray<string>> = Effect.gen(function*() {
  const primary = yield* resolve
  const explicit = yield* Config.option(Config.string("CORRAL_STATE_DIR"))
  const underHome = path.join(os.homedir(), ".local", "state", "corral")
  return Option.isSome(explicit) || underHome === primary ? [primary] : [primary, underHome]
}).pipe(Effect.orDie)

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

/** An errno as a reader understands it, with the path it happened at unless that is `subject`. */
export const reasonOf = (error: unknown, subject?: string): string => {
  const code = codeOf(error)
  const where = typeof error === "object" && error !== null && "path" in error ? String(error.path) : subject
  const at = where === subject ? "" : ` (at ${where})`
  switch (code) {
    case "EROFS":
      return `it is on a read-only file system${at}`
    case "EACCES":
    case "EPERM":
      return `permission denied${at}`
    case "ENOTDIR":
      return `a part of its path is not a directory${at}`
    case "ENOSPC":
    case "EDQUOT":
      return `no space left${at}`
    default:
      return error instanceof Error ? error.message : String(error)
  }
}

const ownership = (stat: fs.Stats): string | undefined =>
  stat.uid === ownUid() ? undefined : `it belongs to uid ${stat.uid}, not to you (uid ${ownUid()})`

/** What is wrong with `dir` as a state directory, if anything: a link, not a directory, or someone else's. */
const problemOf = (stat: fs.Stats): string | undefined =>
  stat.isSymbolicLink()
    ? "it is a symbolic link, and corral never follows links there"
    : !stat.isDirectory()
    ? "it is not a directory"
    : ownership(stat)

/**
 * Creates `dir` (0700), or checks the one there: a directory of this user,
 * not a link, writable. Tightens its mode if it is looser.
 */
export const ensure = (dir: string): Effect.Effect<string, StateDirError> =>
  Effect.try({
    try: () => {
      let stat = lstatIfAny(dir)
      if (stat === undefined) {
        makeDirs(dir)
        stat = fs.lstatSync(dir)
      }
      const problem = problemOf(stat)
      if (problem !== undefined) return problem
      if ((stat.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700)
      // an existing directory on a read-only mount passes every check above
      fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK)
      return undefined
    },
    catch: (error) => new StateDirError({ path: dir, reason: reasonOf(error, dir) })
  }).pipe(
    Effect.flatMap((problem) => problem === undefined ? Effect.succeed(dir) : Effect.fail(new StateDirError({ path: dir, reason: problem })))
  )

/**
 * `mkdir -p`, 0700, failing with the real cause: a recursive `mkdirSync`
 * says ENOENT where a parent is read-only.
 */
const makeDirs = (dir: string): void => {
  try {
    fs.mkdirSync(dir, { mode: 0o700 })
  } catch (error) {
    if (codeOf(error) === "EEXIST") return
    if (codeOf(error) !== "ENOENT" || path.dirname(dir) === dir) throw error
    makeDirs(path.dirname(dir))
    try {
      fs.mkdirSync(dir, { mode: 0o700 })
    } catch (again) {
      if (codeOf(again) !== "EEXIST") throw again
    }
  }
}

const lstatIfAny = (file: string): fs.Stats | undefined => {
  try {
    return fs.lstatSync(file)
  } catch (error) {
    if (codeOf(error) === "ENOENT") return undefined
    throw error
  }
}

/** Checks `dir` without creating it: absent is fine (nothing to read), anything but a directory of this user is not. */
export const check = (dir: string): Effect.Effect<void, StateDirError> =>
  Effect.try({
    try: () => {
      const stat = lstatIfAny(dir)
      return stat === undefined ? undefined : problemOf(stat)
    },
    catch: (error) => new StateDirError({ path: dir, reason: reasonOf(error, dir) })
  }).pipe(
    Effect.flatMap((problem) => problem === undefined ? Effect.void : Effect.fail(new StateDirError({ path: dir, reason: problem })))
  )

/**
 * Writes a private file (0600) atomically: readers see the old or the new
 * content, never half. The temporary file has a name nobody can guess and is
 * created exclusively, so nothing planted at it (a link) is ever written
 * through; the rename replaces whatever is at `file`, links included, without
 * following it. The name's randomness comes from `randomUUID`, which draws
 * on a cache: `randomBytes` reseeds OpenSSL's generator after every fork (a
 * spawn), which cost a journal write 0.36 ms and 24 page faults here.
 */
export const writePrivate = (file: string, content: string): void => {
  const tmp = `${file}.${crypto.randomUUID()}.tmp`
  const { O_CREAT, O_EXCL, O_NOFOLLOW, O_WRONLY } = fs.constants
  const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
  try {
    try {
      fs.writeFileSync(fd, content)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(tmp, file)
  } catch (error) {
    fs.rmSync(tmp, { force: true })
    throw error
  }
}

/**
 * Reads a private file: opened without following a link and without
 * blocking (a FIFO planted there), then read only if it is a regular file of
 * this user and at most `maxBytes` long. Left: why it was refused.
 */
export const readPrivate = (file: string, maxBytes: number): Either.Either<string, string> => {
  const { O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = fs.constants
  let fd: number
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  } catch (error) {
    const code = codeOf(error)
    return Either.left(code === "ELOOP" || code === "EMLINK" ? "it is a symbolic link" : reasonOf(error, file))
  }
  try {
    const stat = fs.fstatSync(fd)
    if (!stat.isFile()) return Either.left("it is not a regular file")
    const foreign = ownership(stat)
    if (foreign !== undefined) return Either.left(foreign)
    if (stat.size > maxBytes) return Either.left(`it is larger than ${maxBytes} bytes`)
    return Either.right(fs.readFileSync(fd, "utf8"))
  } catch (error) {
    return Either.left(reasonOf(error, file))
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Whether the entry at `file` is a socket of this user, without following a
 * link. Left: why not.
 */
export const checkSocket = (file: string): Either.Either<void, string> => {
  try {
    const stat = fs.lstatSync(file)
    if (!stat.isSocket()) return Either.left(stat.isSymbolicLink() ? "it is a symbolic link" : "it is not a socket")
    const foreign = ownership(stat)
    return foreign === undefined ? Either.void : Either.left(foreign)
  } catch (error) {
    return Either.left(reasonOf(error, file))
  }
}

/**
 * Moves a file corral refuses out of the way, to `<name>.bad` in the same
 * directory, so it is reported once rather than at every read. Returns why
 * it could not, if it could not.
 */
export const setAside = (file: string): string | undefined => {
  try {
    fs.renameSync(file, `${file}.bad`)
    return undefined
  } catch (error) {
    return reasonOf(error, file)
  }
}
