#!/usr/bin/env node
// Bundles the `corral` bin (packages/cli/bundle/), from what `tsc -b` built.
// Everything is bundled, effect included: the bin needs nothing from
// node_modules (see docs/adr/0011). Three builds:
//
// - each command (run, mcp, ls, ...) as one CommonJS file, bundle/<name>.cjs,
//   so `corral run` loads only what it runs, in one file V8 can cache the
//   compiled code of (internal/codeCache.ts; docs/adr/0023);
// - the dispatcher, bundle/main.js, with Node built-ins only: main.ts's
//   `import("./Run.js")` of a command module becomes a load of run.cjs
//   through the code cache;
// - the watcher and the pattern worker, ES modules at the paths their
//   spawners compute from `import.meta.url`, split at their `import()`s
//   (the watcher loads its stop code only when a stop is due). Every file
//   sits in bundle/, so Watcher.ts's `new URL("./internal/watcherMain.js",
//   ...)` is bundle/internal/watcherMain.js, and internal/patternWorker.ts's
//   `new URL("./patternWorkerMain.js", ...)` is bundle/patternWorkerMain.js.
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as esbuild from "esbuild"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = path.join(root, "packages", "cli", "bundle")
const built = (pkg, file) => path.join(root, "packages", pkg, "dist", file)

// msgpackr (through @effect/rpc, which MCP uses for JSON only) tries a native
// addon at load and goes on without one: bundled, the addon's loader would
// probe the file system for nothing, so it is left out
const withoutNativeMsgpack = {
  name: "without-native-msgpack",
  setup(build) {
    build.onResolve({ filter: /^msgpackr-extract$/ }, () => ({ path: "msgpackr-extract", namespace: "left-out" }))
    build.onLoad({ filter: /.*/, namespace: "left-out" }, () => ({ contents: "throw new Error(\"left out of the bundle\")", loader: "js" }))
  }
}

const cliDist = path.join(root, "packages", "cli", "dist")
/** The command modules main.ts loads, by the name its `import()`s give them. */
const commands = fs.readFileSync(path.join(cliDist, "main.js"), "utf8").matchAll(/import\("\.\/([A-Z][A-Za-z]*)\.js"\)/g)
const commandFiles = new Map([...commands].map(([, module]) => [`./${module}.js`, `${module.toLowerCase()}.cjs`]))
if (commandFiles.size === 0) throw new Error("packages/cli/dist/main.js imports no command module: has main.ts changed how it loads them?")

// main.js's import() of a command module is a load of its CommonJS file through the code cache
const commandsThroughCodeCache = {
  name: "commands-through-code-cache",
  setup(build) {
    build.onResolve({ filter: /^\.\/[A-Z][A-Za-z]*\.js$/ }, (args) =>
      args.kind === "dynamic-import" && args.importer === path.join(cliDist, "main.js") && commandFiles.has(args.path)
        ? { path: commandFiles.get(args.path), namespace: "command" }
        : undefined)
    build.onLoad({ filter: /.*/, namespace: "command" }, (args) => ({
      contents: `import { load } from ${JSON.stringify(path.join(cliDist, "internal", "codeCache.js"))}
export const { main } = load(new URL(${JSON.stringify(`./${args.path}`)}, import.meta.url))`,
      loader: "js",
      resolveDir: cliDist
    }))
  }
}

const shared = { bundle: true, platform: "node", target: "node20", minify: true, legalComments: "none", logLevel: "warning" }
// built aside, then swapped in: a corral started meanwhile finds one whole bundle or the other
const fresh = `${outdir}.new-${process.pid}`
const old = `${outdir}.old-${process.pid}`
await esbuild.build({
  ...shared,
  entryPoints: Object.fromEntries([...commandFiles].map(([module, file]) => [file.replace(/\.cjs$/, ""), path.join(cliDist, module)])),
  outdir: fresh,
  outExtension: { ".js": ".cjs" },
  format: "cjs",
  // what the ES modules name relative to themselves is relative to the command's file
  define: { "import.meta.url": "__corralUrl" },
  banner: { js: 'var __corralUrl = require("node:url").pathToFileURL(__filename).href;' },
  plugins: [withoutNativeMsgpack]
})
await esbuild.build({
  ...shared,
  entryPoints: { main: path.join(cliDist, "main.js") },
  outdir: fresh,
  format: "esm",
  plugins: [commandsThroughCodeCache]
})
await esbuild.build({
  ...shared,
  entryPoints: {
    "internal/watcherMain": built("core", "internal/watcherMain.js"),
    patternWorkerMain: built("core", "internal/patternWorkerMain.js")
  },
  outdir: fresh,
  splitting: true,
  format: "esm",
  chunkNames: "chunk-[hash]",
  plugins: [withoutNativeMsgpack]
})
// a file a chunk names relative to itself (a spawned entry, package.json) must be where it looks
for (const file of fs.readdirSync(fresh, { recursive: true }).filter((f) => /\.c?js$/.test(f))) {
  const chunk = path.join(fresh, file)
  for (const [, relative] of fs.readFileSync(chunk, "utf8").matchAll(/new URL\("(\.{1,2}\/[^"]+)",(?:import\.meta\.url|__corralUrl)\)/g)) {
    // inside the bundle, or (package.json) beside it once it is in place
    const inside = path.resolve(path.dirname(chunk), relative)
    const where = inside.startsWith(fresh + path.sep) ? inside : path.resolve(path.dirname(path.join(outdir, file)), relative)
    if (!fs.existsSync(where)) {
      fs.rmSync(fresh, { recursive: true, force: true })
      throw new Error(`bundle/${file} loads ${relative}, which is not at ${where}: make it an entry at that path`)
    }
  }
}
if (fs.existsSync(outdir)) fs.renameSync(outdir, old)
fs.renameSync(fresh, outdir)
fs.rmSync(old, { recursive: true, force: true })
