#!/usr/bin/env node
// Bundles the `corral` bin (packages/cli/bundle/), from what `tsc -b` built:
// one small entry, and a chunk per command split at main.ts's `import()`s,
// so `corral run` loads only what it runs. Everything is bundled, effect
// included: the bin needs nothing from node_modules (see docs/adr/0011).
//
// The watcher and the pattern worker are entries of their own, at the paths
// their spawners compute from `import.meta.url`: a chunk sits in bundle/,
// so `new URL("./internal/watcherMain.js", import.meta.url)` is
// bundle/internal/watcherMain.js.
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
    "internal/patternWorkerMain": built("core", "internal/patternWorkerMain.js")
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
if (fs.existsSync(outdir)) fs.renameSync(outdir, old)
fs.renameSync(fresh, outdir)
fs.rmSync(old, { recursive: true, force: true })
