/**
 * The bin's code cache (internal/codeCache.ts, docs/adr/0023): a real Node
 * child loads a CommonJS file through it, with XDG_CACHE_HOME in a
 * temporary directory, and the test reads what it left there.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"

const codeCache = fileURLToPath(new URL("../dist/internal/codeCache.js", import.meta.url))
const temps: Array<string> = []

afterEach(() => {
  for (const dir of temps.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

/** A temporary home for one test: a command file `hello.cjs`, and the cache directory it will use. */
const setup = () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "corral-codecache-"))
  temps.push(root)
  const command = path.join(root, "hello.cjs")
  fs.writeFileSync(command, `const os = require("node:os")\nmodule.exports.hello = (name) => "hello " + name + " from " + typeof os.cpus\n`)
  return { root, command, cacheHome: path.join(root, "cache"), cacheDir: path.join(root, "cache", "corral") }
}

/** Loads `command` in a child with XDG_CACHE_HOME set (and HOME the test's directory), and returns what its export said. */
const run = (command: string, cacheHome: string) => {
  const script = `import { load } from ${JSON.stringify(codeCache)}; console.log(load(new URL(${JSON.stringify(`file://${command}`)})).hello("corral"))`
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, XDG_CACHE_HOME: cacheHome, HOME: path.dirname(command) },
    encoding: "utf8",
    timeout: 20_000
  })
  expect({ status: child.status, signal: child.signal, stderr: child.stderr }).toEqual({ status: 0, signal: null, stderr: "" })
  return child.stdout.trim()
}

const caches = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".v8")) : [])
const modeOf = (file: string) => (fs.statSync(file).mode & 0o777).toString(8)

describe("the bin's code cache", () => {
  it("writes what a run compiled at its exit, 0600 in a 0700 directory, named by the file's hash and V8's tag; the next run uses it and writes nothing", () => {
    const { command, cacheDir, cacheHome } = setup()
    expect(run(command, cacheHome)).toBe("hello corral from function")
    const [cache, ...more] = caches(cacheDir)
    expect(more).toEqual([])
    expect(cache).toMatch(/^hello-[0-9a-f]{32}-\d+\.v8$/)
    expect([modeOf(cacheDir), modeOf(path.join(cacheDir, cache!))]).toEqual(["700", "600"])
    const written = fs.statSync(path.join(cacheDir, cache!))

    expect(run(command, cacheHome)).toBe("hello corral from function")
    const after = fs.statSync(path.join(cacheDir, cache!))
    expect([after.ino, after.mtimeMs]).toEqual([written.ino, written.mtimeMs])
  })

  it("replaces a cache V8 rejects, and one another user could have written, without reading it", () => {
    const { command, cacheDir, cacheHome } = setup()
    run(command, cacheHome)
    const file = path.join(cacheDir, caches(cacheDir)[0]!)
    for (const [content, mode] of [["not a V8 cache", 0o600], [fs.readFileSync(file), 0o666]] as const) {
      fs.writeFileSync(file, content)
      fs.chmodSync(file, mode)
      const before = fs.statSync(file).ino
      expect(run(command, cacheHome)).toBe("hello corral from function")
      expect({ replaced: fs.statSync(file).ino !== before, mode: modeOf(file) }).toEqual({ replaced: true, mode: "600" })
    }
  })

  it("uses no directory that others can write, and none it cannot make, and the command runs all the same", () => {
    const { command, cacheDir, cacheHome, root } = setup()
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o777 })
    fs.chmodSync(cacheDir, 0o777)
    expect(run(command, cacheHome)).toBe("hello corral from function")
    expect(caches(cacheDir)).toEqual([])
    // Node 20's recursive mkdir spins for ever under /proc
    expect(run(command, "/proc/no-such-dir/cache")).toBe("hello corral from function")
    // a relative XDG_CACHE_HOME is to be ignored (XDG Base Directory): ~/.cache then
    expect(run(command, path.relative(process.cwd(), path.join(root, "rel")))).toBe("hello corral from function")
    expect(fs.existsSync(path.join(root, "rel"))).toBe(false)
    expect(caches(path.join(root, ".cache", "corral"))).toHaveLength(1)
  })

  it("keeps the four newest caches of a command, and others' caches untouched", () => {
    const { command, cacheDir, cacheHome } = setup()
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 })
    const old = ["hello-a-1.v8", "hello-b-1.v8", "hello-c-1.v8", "hello-d-1.v8", "other-a-1.v8"]
    old.forEach((name, i) => {
      fs.writeFileSync(path.join(cacheDir, name), "x", { mode: 0o600 })
      fs.utimesSync(path.join(cacheDir, name), 1_000_000 + i, 1_000_000 + i)
    })
    run(command, cacheHome)
    const fresh = (name: string) => /^hello-[0-9a-f]{32}-\d+\.v8$/.test(name)
    expect(caches(cacheDir).filter(fresh)).toHaveLength(1)
    expect(caches(cacheDir).filter((name) => !fresh(name)).sort()).toEqual(["hello-b-1.v8", "hello-c-1.v8", "hello-d-1.v8", "other-a-1.v8"])
  })
})
