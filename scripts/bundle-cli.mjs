#!/usr/bin/env node
// Bundles the `corral` bin (packages/cli/bundle/), from what `tsc -b` built:
// one small entry, and a chunk per command split at main.ts's `import()`s,
// so `corral run` loads only what it runs. Everything is bundled, effect
// included: the bin needs nothing from node_modules (see docs/adr/0011).
//
// The watcher and the pattern worker are entries of their own, at the paths
// their spawners compute from `import.meta.url`. Every chunk sits in
// bundle/, so Watcher.ts's `new URL("./internal/watcherMain.js", ...)` is
// bundle/internal/watcherMain.js, and internal/patternWorker.ts's
// `new URL("./patternWorkerMain.js", ...)` is bundle/patternWorkerMain.js.
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

// built aside, then swapped in: a corral started meanwhile finds one whole bundle or the other
const fresh = `${outdir}.new-${process.pid}`
const old = `${outdir}.old-${process.pid}`
await esbuild.build({
  entryPoints: {
    main: built("cli", "main.js"),
    "internal/watcherMain": built("core", "internal/watcherMain.js"),
    patternWorkerMain: built("core", "internal/patternWorkerMain.js")
  },
  outdir: fresh,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  chunkNames: "chunk-[hash]",
  minify: true,
  // CommonJS modules bundled in (ws, msgpackr: under @effect/platform-node and @effect/rpc) `require` Node built-ins
  banner: { js: 'import { createRequire as __corralRequire } from "node:module"; const require = __corralRequire(import.meta.url);' },
  legalComments: "none",
  plugins: [withoutNativeMsgpack],
  logLevel: "warning"
})
// a file a chunk names relative to itself (a spawned entry, package.json) must be where it looks
for (const file of fs.readdirSync(fresh, { recursive: true }).filter((f) => f.endsWith(".js"))) {
  const chunk = path.join(fresh, file)
  for (const [, relative] of fs.readFileSync(chunk, "utf8").matchAll(/new URL\("(\.{1,2}\/[^"]+)",import\.meta\.url\)/g)) {
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
