/**
 * Where supervisors keep their journals and control sockets: private to the
 * user (0700), and overridable for tests and containers.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/** `CORRAL_STATE_DIR`, else `$XDG_STATE_HOME/corral`, else `~/.local/state/corral`. */
export const resolve: Effect.Effect<string> = Effect.gen(function*() {
  const explicit = yield* Config.option(Config.string("CORRAL_STATE_DIR"))
  if (Option.isSome(explicit)) return path.resolve(explicit.value)
  const xdg = yield* Config.option(Config.string("XDG_STATE_HOME"))
  return path.join(Option.getOrElse(xdg, () => path.join(os.homedir(), ".local", "state")), "corral")
}).pipe(Effect.orDie)

/** Creates `dir` (0700) and tightens it if it exists with looser modes. */
export const ensure = (dir: string): Effect.Effect<string> =>
  Effect.sync(() => {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    if ((fs.statSync(dir).mode & 0o077) !== 0) fs.chmodSync(dir, 0o700)
    return dir
  })

/** Writes a private file atomically: readers see the old or the new content, never half. */
export const writePrivate = (file: string, content: string): void => {
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, content, { mode: 0o600 })
  fs.renameSync(tmp, file)
}
