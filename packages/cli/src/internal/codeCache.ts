/**
 * Loads a command of the bundled bin (`bundle/<command>.cjs`, one CommonJS
 * file each) through a V8 code cache, with nothing but Node loaded. Node 20
 * caches no compiled code of its own (`module.enableCompileCache` is Node
 * 22), and compiling effect's code is about a fifth of what `corral run`
 * costs to start; see docs/adr/0023-code-cache.md.
 *
 * The cache holds bytecode this process then runs, so it is trusted as
 * the bundle is: a directory of this user's alone (0700, not a link), files
 * of this user only, written whole (a rename) and named by the bundle's
 * SHA-256 and V8's version tag (its version, flags and CPU features), so a
 * rebuilt bundle or another Node never meets a cache that is not its own.
 * Anything else found there is not read. Without a usable directory the
 * command loads as well, only compiled afresh.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as v8 from "node:v8"
import * as vm from "node:vm"

/** Caches kept per command, the most recently written: a few installs or Node versions side by side each keep theirs. */
const KEPT = 4

/** `$XDG_CACHE_HOME/corral`, else `~/.cache/corral`. */
export const directory = (env: NodeJS.ProcessEnv = process.env): string =>
  path.join(env.XDG_CACHE_HOME !== undefined && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(os.homedir(), ".cache"), "corral")

const uid = () => process.getuid?.() ?? 0

/** Creates `dir` unless it exists; its parent must. */
const makeDirectory = (dir: string) => {
  try {
    fs.mkdirSync(dir, { mode: 0o700 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  }
}

/**
 * The directory when it is this user's alone, created (and `~/.cache` with
 * it) if missing; else undefined: no cache. Not `mkdirSync`'s `recursive`,
 * which Node 20 retries for ever under a parent such as /proc.
 */
const privateDirectory = (dir: string): string | undefined => {
  try {
    makeDirectory(path.dirname(dir))
    makeDirectory(dir)
    const stat = fs.lstatSync(dir)
    return stat.isDirectory() && stat.uid === uid() && (stat.mode & 0o077) === 0 ? dir : undefined
  } catch {
    return undefined
  }
}

/** The cache at `file` when it is a regular file of this user that no one else can write; else undefined. */
const read = (file: string): Buffer | undefined => {
  let fd: number | undefined
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
    const stat = fs.fstatSync(fd)
    return stat.isFile() && stat.uid === uid() && (stat.mode & 0o022) === 0 ? fs.readFileSync(fd) : undefined
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** Writes the cache whole (a reader finds the old one or the new), then drops the command's oldest beyond `KEPT`. */
const write = (dir: string, file: string, data: Buffer, command: string) => {
  const fresh = `${file}.${process.pid}.tmp`
  try {
    fs.writeFileSync(fresh, data, { mode: 0o600, flag: "wx" })
    fs.renameSync(fresh, file)
    const own = fs.readdirSync(dir)
      .filter((name) => name.startsWith(`${command}-`) && name.endsWith(".v8"))
      .map((name) => ({ name, at: fs.statSync(path.join(dir, name)).mtimeMs }))
      .sort((a, b) => b.at - a.at)
    for (const { name } of own.slice(KEPT)) fs.rmSync(path.join(dir, name), { force: true })
  } catch {
    // a full disk or a race with another corral: this run's cache is lost, the next one writes it
    fs.rmSync(fresh, { force: true })
  }
}

/** CommonJS's own wrapper: the bundle is a CommonJS module, run as `require` would run it. */
const wrap = (source: string) => `(function (exports, require, module, __filename, __dirname) {${source}\n})`

/**
 * Runs the CommonJS file at `url` and returns its exports. Its code comes
 * from the cache when there is one for it; else, once the process exits, the
 * cache is written with what this run compiled (so the next start of the
 * command finds compiled every function this one used).
 */
export const load = (url: URL): unknown => {
  const file = fileURLToPath(url)
  const source = fs.readFileSync(file, "utf8")
  const command = path.basename(file, ".cjs")
  const dir = privateDirectory(directory())
  const hash = crypto.createHash("sha256").update(source).digest("hex").slice(0, 32)
  const tag = v8.cachedDataVersionTag()
  const cacheFile = dir === undefined ? undefined : path.join(dir, `${command}-${hash}-${tag}.v8`)
  const cachedData = cacheFile === undefined ? undefined : read(cacheFile)
  const script = new vm.Script(wrap(source), {
    filename: file,
    cachedData,
    importModuleDynamically: vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
  })
  if (dir !== undefined && cacheFile !== undefined && (cachedData === undefined || script.cachedDataRejected === true)) {
    // a V8 flag set since (as `v8.setFlagsFromString` does) would make V8 reject what it writes: then it writes nothing
    process.once("exit", () => v8.cachedDataVersionTag() === tag && write(dir, cacheFile, script.createCachedData(), command))
  }
  const module = { exports: {} }
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file))
  return module.exports
}
