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

fs.rmSync(outdir, { recursive: true, force: true })
await esbuild.build({
  entryPoints: {
    main: built("cli", "main.js"),
    "internal/watcherMain": built("core", "internal/watcherMain.js"),
    "internal/patternWorkerMain": built("core", "internal/patternWorkerMain.js")
  },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  chunkNames: "chunk-[hash]",
  minify: true,
  // the CommonJS modules bundled in (the MCP SDK's dependencies) call `require` for Node's built-ins
  banner: { js: 'import { createRequire as __corralRequire } from "node:module"; const require = __corralRequire(import.meta.url);' },
  legalComments: "none",
  logLevel: "warning"
})
