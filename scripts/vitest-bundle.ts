/**
 * Before any test: the `corral` bin's bundle, fresh from what `tsc -b`
 * built. Tests run the bin, and a bundle older than dist/ would test old
 * code; `npx tsc -b && npx vitest run FILE` must test what was just built.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

export default function setup() {
  execFileSync(process.execPath, [fileURLToPath(new URL("bundle-cli.mjs", import.meta.url))], { stdio: "inherit" })
}
