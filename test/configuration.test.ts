/**
 * The README's Configuration table names every key corral reads through
 * Config, and nothing else: a key added to the code without a row, or a row
 * left after its key went, fails here.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const root = join(import.meta.dirname, "..")

const sources = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

const keysInCode = () =>
  new Set(["core", "tools", "cli"].flatMap((pkg) =>
    sources(join(root, "packages", pkg, "src")).flatMap((file) => [...readFileSync(file, "utf8").matchAll(/"(CORRAL_[A-Z_]+)"/g)].map((m) => m[1]!))
  ))

const keysInTable = () => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Configuration"), readme.indexOf("\n## ", readme.indexOf("## Configuration") + 1))
  return new Set([...section.matchAll(/^\| `(CORRAL_[A-Z_]+)` \|/gm)].map((m) => m[1]!))
}

// set by corral for its own processes, never read as configuration
const internalKeys = new Set(["CORRAL_SHELL_ID", "CORRAL_SHELL_IDS", "CORRAL_SIGIGN", "CORRAL_TEST_PIDNS"])

describe("the README's Configuration table", () => {
  it("has one row per CORRAL_ key the packages read, and no other", () => {
    expect([...keysInTable()].sort()).toEqual([...keysInCode()].filter((key) => !internalKeys.has(key)).sort())
  })
})
