/**
 * What each published tarball holds, read from `npm pack --dry-run`: the
 * README and LICENSE, built JS with its .d.ts, source maps only next to the
 * sources they name, no tests or fixtures, an `exports` map of the public
 * modules only, and Effect as a peer; the CLI's, its bin and a bundle that
 * depends on nothing. scripts/install-test.mjs installs the tarballs for
 * real; this names the broken promise without the registry.
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize } from "node:path"
import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"

const root = join(import.meta.dirname, "..")
const packages = ["core", "tools", "cli"] as const

interface Manifest {
  readonly exports?: Record<string, unknown>
  readonly dependencies?: Record<string, string>
  readonly optionalDependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>
  readonly engines?: Record<string, string>
}

const manifest = (pkg: string): Manifest => JSON.parse(readFileSync(join(root, "packages", pkg, "package.json"), "utf8"))

/** `npm pack --json`: one entry per package packed, with its files. */
const decodePacked = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Schema.Struct({ files: Schema.Array(Schema.Struct({ path: Schema.String })) }))))

const decodeSourceMap = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ sources: Schema.Array(Schema.String) })))

const rootManifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Manifest & {
  readonly optionalDependencies: Record<string, string>
}

const packedFiles = (pkg: string): ReadonlyArray<string> => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: join(root, "packages", pkg),
    encoding: "utf8",
    env: { ...process.env, npm_config_update_notifier: "false" }
  })
  return decodePacked(out)[0]!.files.map((f) => f.path)
}

const publicModules = (pkg: string) =>
  readdirSync(join(root, "packages", pkg, "src")).filter((f) => /^[A-Z]\w*\.ts$/.test(f)).map((f) => f.slice(0, -3)).sort()

const ecosystem = ["effect", "@effect/platform", "@effect/platform-node", "@effect/ai", "@effect/experimental", "@effect/rpc"]

describe.each(packages)("the @corral/%s tarball", (pkg) => {
  const files = packedFiles(pkg)

  it("holds its README, LICENSE and package.json", () => {
    expect(files).toEqual(expect.arrayContaining(["README.md", "LICENSE", "package.json"]))
  })

  it("holds no tests, fixtures or build info", () => {
    expect(files.filter((f) => /(^|\/)(test|tests|fixtures|__tests__)\/|\.test\.|\.tsbuildinfo$/.test(f))).toEqual([])
  })

  it("declares Node 20 as its floor", () => {
    expect(manifest(pkg).engines).toEqual({ node: ">=20" })
  })
})

describe.each(["core", "tools"] as const)("the @corral/%s library tarball", (pkg) => {
  const files = packedFiles(pkg)

  it("has a .d.ts beside every built module", () => {
    const js = files.filter((f) => f.startsWith("dist/") && f.endsWith(".js"))
    expect(js.length).toBeGreaterThan(0)
    expect(js.filter((f) => !files.includes(f.replace(/\.js$/, ".d.ts")))).toEqual([])
  })

  it("ships a source map only with the sources it names", () => {
    const missing = files.filter((f) => f.endsWith(".map")).flatMap((map) => {
      const { sources } = decodeSourceMap(readFileSync(join(root, "packages", pkg, map), "utf8"))
      return sources.map((source) => normalize(join(dirname(map), source))).filter((source) => !files.includes(source))
    })
    expect(missing).toEqual([])
  })

  it("takes Effect as a peer with a range of the 3.x line, never as its own dependency", () => {
    const { dependencies = {}, peerDependencies = {} } = manifest(pkg)
    expect(Object.keys(dependencies).filter((name) => ecosystem.includes(name))).toEqual([])
    expect(peerDependencies["effect"]).toMatch(/^\^3\.\d+\.\d+$/)
    for (const [name, range] of Object.entries(peerDependencies)) expect(range, name).toMatch(/^\^\d+\.\d+\.\d+$/)
  })
})

describe("the pty addon (docs/adr/0022)", () => {
  it("is an optional peer of @corral/core, in the range of the exact version the repository installs", () => {
    const { peerDependencies = {}, peerDependenciesMeta = {} } = manifest("core")
    const exact = rootManifest.optionalDependencies["@lydell/node-pty"]
    expect(exact).toMatch(/^\d+\.\d+\.\d+$/)
    expect(peerDependencies["@lydell/node-pty"]).toBe(`^${exact}`)
    expect(peerDependenciesMeta["@lydell/node-pty"]).toEqual({ optional: true })
  })
})

describe("the @corral/cli tarball", () => {
  const files = packedFiles("cli")

  it("holds the bin and its bundle, and no modules of its own to import", () => {
    expect(files).toEqual(expect.arrayContaining(["bin/corral.js", "bundle/main.js", "bundle/internal/watcherMain.js", "bundle/patternWorkerMain.js"]))
    expect(files.filter((f) => f.startsWith("dist/") || f.startsWith("src/"))).toEqual([])
  })

  it("depends on nothing but the optional pty addon: the bundle holds its own effect, which no app shares (docs/adr/0011, 0022)", () => {
    const { dependencies = {}, optionalDependencies = {}, peerDependencies = {} } = manifest("cli")
    expect({ dependencies, optionalDependencies, peerDependencies }).toEqual({
      dependencies: {},
      optionalDependencies: { "@lydell/node-pty": rootManifest.optionalDependencies["@lydell/node-pty"] },
      peerDependencies: {}
    })
  })
})

describe.each(["core", "tools"] as const)("the @corral/%s exports map", (pkg) => {
  const exports = manifest(pkg).exports ?? {}

  it("names every public module (src/*.ts), and nothing else", () => {
    expect(Object.keys(exports).sort()).toEqual([".", ...publicModules(pkg).map((m) => `./${m}`), "./package.json"].sort())
  })

  it("has no pattern and no path into internal/", () => {
    const targets = JSON.stringify(exports)
    expect(Object.keys(exports).filter((key) => key.includes("*"))).toEqual([])
    expect(targets).not.toMatch(/internal|\*/)
  })
})
