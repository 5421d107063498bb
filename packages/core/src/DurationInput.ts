/**
 * Human durations as people type them on a command line or in an
 * environment variable: `500ms`, `3s`, `2m`, `1h`, or bare seconds.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

export const parse = (input: string): Either.Either<Duration.Duration, string> => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(input)
  if (match === null) {
    return Either.left(`invalid duration "${input}": use a number with an optional unit, like 500ms, 3s, 2m or 1h (bare numbers are seconds)`)
  }
  return Either.right(Duration.millis(Math.round(Number(match[1]) * UNITS[match[2] ?? "s"]!)))
}

/** A `Config` reading a human duration. */
export const config = (name: string): Config.Config<Duration.Duration> =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => Either.mapLeft(parse(s), (message) => ConfigError.InvalidData([], message)))
  )

export const format = (d: Duration.DurationInput): string => {
  const ms = Duration.toMillis(d)
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)}m${Math.floor((ms % 60_000) / 1000)}s`
  return `${Math.floor(ms / 3_600_000)}h${Math.floor((ms % 3_600_000) / 60_000)}m`
}
