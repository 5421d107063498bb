/**
 * Durations as GNU timeout(1) reads them, for `corral run`: a floating-point
 * number as strtod(3) takes it (leading blanks, a sign, decimal or hex, an
 * exponent, `inf`), then at most one suffix, `s`, `m`, `h` or `d`. corral
 * adds `ms`. What timeout does at the edges, corral does too:
 *
 * - 0 (or -0) disables the timeout;
 * - a positive value too small for a double (`1e-10000`) is not 0: it times out at once;
 * - a value too large for any clock (`1e400`, `9223372036854775808d`, `inf`) never fires;
 * - a negative value, NaN, or anything left over is an error.
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

const SUFFIXES: Readonly<Record<string, number>> = { "": 1, s: 1, m: 60, h: 3600, d: 86_400, ms: 0.001 }

// the longest prefix strtod(3) converts, in the C locale; hex first, or "0x1" would read as "0"
const NUMBER = new RegExp(
  "^[ \\t\\n\\v\\f\\r]*([+-]?)(?:" +
    "0x(?<hexInt>[0-9a-f]*)(?:\\.(?<hexFrac>[0-9a-f]*))?(?<=[0-9a-f]|[0-9a-f]\\.)(?:p(?<hexExp>[+-]?\\d+))?" +
    "|(?<dec>(?:\\d+\\.?\\d*|\\.\\d+)(?:e[+-]?\\d+)?)" +
    "|(?<inf>inf(?:inity)?)" +
    "|(?<nan>nan(?:\\([0-9a-z_]*\\))?)" +
    ")",
  "i"
)

/** A hex float's value, scaled in two steps so that a large mantissa times a tiny power does not become 0 or NaN early. */
const hexValue = (int: string, frac: string, exp: string | undefined): number => {
  const mantissa = Number(BigInt(`0x${int}${frac}`))
  const power = Number(exp ?? 0) - 4 * frac.length
  if (mantissa === 0) return 0
  const half = Math.trunc(power / 2)
  return mantissa * 2 ** half * 2 ** (power - half)
}

const invalid = (input: string) =>
  Either.left(
    `invalid duration ${JSON.stringify(input)}: use a number with an optional unit s, m, h or d (or ms), like 30s, 1.5m or 500ms; 0 means no limit`
  )

/**
 * Seconds, as timeout(1) reads `input`: 0 means none, `Infinity` means never.
 * An underflow is returned as a nanosecond, an overflow as `Infinity`.
 */
export const parseSeconds = (input: string): Either.Either<number, string> => {
  const match = NUMBER.exec(input)
  if (match === null || match.groups?.nan !== undefined) return invalid(input)
  const { hexInt, hexFrac, hexExp, dec } = match.groups!
  const negative = match[1] === "-"
  const magnitude = dec !== undefined
    ? Number(dec)
    : hexInt !== undefined
    ? hexValue(hexInt, hexFrac ?? "", hexExp)
    : Infinity
  // strtod says ERANGE with 0 when nonzero digits underflowed: a tiny positive stays positive, a tiny negative is negative
  const digits = dec !== undefined ? dec.replace(/e.*$/i, "") : `${hexInt ?? ""}${hexFrac ?? ""}`
  const underflow = magnitude === 0 && /[1-9a-f]/i.test(digits)
  const unit = SUFFIXES[input.slice(match[0].length)]
  const seconds = magnitude * unit
  if (unit === undefined || Number.isNaN(seconds) || (negative && (magnitude > 0 || underflow))) return invalid(input)
  return Either.right(underflow || (seconds === 0 && magnitude > 0) ? 1e-9 : seconds)
}

/** Node's timers and effect's clock take at most 2^31-1 ms; past 2^53 ms a double no longer counts milliseconds. */
const NEVER_MS = 2 ** 53

/**
 * A parsed duration as effect sees it: None for 0 (disabled), `Duration.infinity`
 * for a value no clock reaches, else the duration.
 */
export const toDuration = (seconds: number): Option.Option<Duration.Duration> => {
  if (seconds === 0) return Option.none()
  const ms = seconds * 1000
  return Option.some(ms >= NEVER_MS ? Duration.infinity : Duration.millis(ms))
}

/** `input` as timeout(1) reads it: None for 0, `Duration.infinity` for never. */
export const parse = (input: string): Either.Either<Option.Option<Duration.Duration>, string> =>
  Either.map(parseSeconds(input), toDuration)
