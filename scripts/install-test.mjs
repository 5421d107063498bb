#!/usr/bin/env node
// Installs corral as a user would, outside this checkout: `npm pack` the three
// packages, install the tarballs into a fresh project with `effect@3` (the
// README's install line, tarballs for package names), then typecheck and run
// the packages' README examples, run the `corral` bin, and check that the
// project holds one copy of effect. Every test in the checkout resolves
// packages through the workspace; only this sees what a tarball really holds.
//
//   node scripts/install-test.mjs [--keep]     (--keep leaves the project for a look)
//
// Prints one line per check and exits non-zero if any failed. Needs the build
// (`tsc -b`) and the npm registry, for the peers.
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const root = resolve(import.meta.dirname, "..")
const packages = ["core", "tools", "cli"]
const rootManifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const keep = process.argv.includes("--keep")

const work = mkdtempSync(join(tmpdir(), "corral-install-test-"))
const app = join(work, "app")
const tarballs = join(work, "tarballs")
mkdirSync(app)
mkdirSync(tarballs)
// the examples' journals and sockets stay in the project, not in the user's state directory
const env = { ...process.env, XDG_STATE_HOME: join(work, "state"), npm_config_fund: "false", npm_config_audit: "false", npm_config_update_notifier: "false" }
delete env.CORRAL_STATE_DIR
// inherited from `npm run`/`npm test`, these would point npm at this checkout
for (const key of Object.keys(env)) if (/^npm_(package|lifecycle|config_(local_prefix|prefix|workspace))/i.test(key)) delete env[key]

const results = []
const check = (name, ok, detail = "") => {
  results.push(ok)
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok || detail === "" ? "" : `\n${detail.replace(/^/gm, "     ")}`}`)
  return ok
}

const run = (cmd, args, cwd, timeout = 300_000) => {
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout, maxBuffer: 64 * 1024 * 1024 })
  return { status: r.status, signal: r.signal, out: `${r.stdout ?? ""}${r.stderr ?? ""}`, stdout: r.stdout ?? "", error: r.error }
}

const describeRun = (r) => `${r.error ? `${r.error.message}\n` : ""}exit ${r.status}${r.signal ? ` (${r.signal})` : ""}\n${r.out.trim().split("\n").slice(-40).join("\n")}`

/** The ```ts blocks of a package's README: the examples a user copies. */
const readmeExamples = (pkg) => {
  const readme = readFileSync(join(root, "packages", pkg, "README.md"), "utf8")
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1])
}

/** What each README example prints when it works, in order. */
const expected = {
  core: ['matched "ready\\n"', "started"],
  tools: ["hello from a tool"]
}

/** The `npx corral ...` lines of the bin's README example, as a user copies them (comments dropped). */
const cliExamples = () => {
  const readme = readFileSync(join(root, "packages", "cli", "README.md"), "utf8")
  return [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1].split("\n"))
    .filter((line) => line.startsWith("npx corral "))
    .map((line) => line.replace(/\s+#.*$/, ""))
}

/** What each of those does when it works, by subcommand: run with stdin at its end, as a script would. */
const cliExpected = {
  run: (r) => r.status === 124 && /stopped group/.test(r.out),
  mcp: (r) => r.status === 0 && r.stdout === "",
  ls: (r) => r.status === 0 && r.stdout === "no background shells\n"
}

try {
  const packed = run("npm", ["pack", "--pack-destination", tarballs, ...packages.flatMap((p) => ["--workspace", `packages/${p}`])], root)
  const files = readdirSync(tarballs).filter((f) => f.endsWith(".tgz")).map((f) => join(tarballs, f))
  if (!check(`npm pack: ${files.length} tarballs`, packed.status === 0 && files.length === packages.length, describeRun(packed))) {
    throw new Error("nothing to install")
  }

  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "corral-install-test", private: true, type: "module" }, null, 2))
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true,
      exactOptionalPropertyTypes: true, types: ["node"], outDir: "out", skipLibCheck: false
    },
    include: ["*.ts"]
  }, null, 2))
  const dev = rootManifest.devDependencies
  const installed = run("npm", ["install", "effect@3", ...files, `typescript@${dev.typescript}`, `@types/node@${dev["@types/node"]}`], app)
  const installWarnings = installed.out.split("\n").filter((line) => /EBADENGINE|ERESOLVE|peer dep/i.test(line))
  check("npm install effect@3 and the tarballs", installed.status === 0, describeRun(installed))
  check("the install warns of no engine or peer mismatch", installWarnings.length === 0, installWarnings.join("\n"))

  const copies = run("npm", ["ls", "effect", "--all", "--parseable"], app)
  const paths = [...new Set(copies.stdout.split("\n").filter((line) => line.trim() !== "" && line !== app))]
  check(`npm ls effect: one copy (${paths.map((p) => p.slice(app.length + 1)).join(", ")})`, copies.status === 0 && paths.length === 1, describeRun(copies))

  const examples = Object.entries(expected).flatMap(([pkg, outputs]) => {
    const blocks = readmeExamples(pkg)
    check(`packages/${pkg}/README.md has ${outputs.length} example(s)`, blocks.length === outputs.length, `found ${blocks.length}`)
    return blocks.map((code, i) => ({ name: `${pkg}-example-${i + 1}`, code, output: outputs[i] ?? "" }))
  })
  for (const e of examples) writeFileSync(join(app, `${e.name}.ts`), e.code)
  // the repository README's library examples name a project's own `npm run dev`: typechecked, not run
  const guide = [...readFileSync(join(root, "README.md"), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1])
  check(`README.md has ${guide.length} TypeScript examples (typechecked below)`, guide.length > 0)
  for (const [i, code] of guide.entries()) writeFileSync(join(app, `readme-example-${i + 1}.ts`), code)
  const typecheck = run("npx", ["tsc", "-p", "."], app)
  check("tsc: the README examples typecheck against the installed .d.ts", typecheck.status === 0, describeRun(typecheck))
  for (const e of examples) {
    const r = run("node", [`out/${e.name}.js`], app, 60_000)
    check(`${e.name} (README) runs and prints ${JSON.stringify(e.output)}`, r.status === 0 && r.stdout.includes(e.output), describeRun(r))
  }

  const help = run("npx", ["--no-install", "corral", "run", "--help"], app, 60_000)
  check("npx corral run --help", help.status === 0 && /corral run/.test(help.out), describeRun(help))
  const commands = cliExamples()
  const subcommands = commands.map((line) => line.split(/\s+/)[2])
  check(`packages/cli/README.md has corral ${subcommands.join(", ")}`, subcommands.join() === Object.keys(cliExpected).join(), commands.join("\n"))
  for (const line of commands) {
    const r = run("sh", ["-c", line.replace(/^npx /, "npx --no-install ")], app, 60_000)
    check(`${line} (README)`, cliExpected[line.split(/\s+/)[2]]?.(r) === true, describeRun(r))
  }
} catch (error) {
  check("install test", false, String(error?.stack ?? error))
} finally {
  if (keep) console.log(`kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}

const failed = results.filter((ok) => !ok).length
console.log(`install test: ${results.length - failed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
