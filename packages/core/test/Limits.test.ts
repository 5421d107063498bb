import type { LimitsShape } from "@corral/core"
import { DurationInput, Limits, defaults } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Layer from "effect/Layer"

const limitsOf = <E>(layer: Layer.Layer<Limits, E>) => Effect.provide(Limits, layer)

const fromEnv = (env: Record<string, string>, overrides?: Partial<LimitsShape>) =>
  limitsOf(Limits.layerConfig(overrides)).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

const millis = (limits: LimitsShape) => ({
  grace: Duration.toMillis(limits.grace),
  killTimeout: Duration.toMillis(limits.killTimeout),
  killInterval: Duration.toMillis(limits.killInterval),
  bufferBytes: limits.bufferBytes,
  maxShells: limits.maxShells,
  lifetime: Duration.toMillis(limits.lifetime),
  retention: Duration.toMillis(limits.retention)
})

const defaultMillis = {
  grace: 3_000,
  killTimeout: 1_000,
  killInterval: 10,
  bufferBytes: 256 * 1024,
  maxShells: 16,
  lifetime: 3_600_000,
  retention: 1_800_000
}

describe("Limits", () => {
  it.effect("layer gives the defaults", () =>
    Effect.gen(function*() {
      expect(millis(yield* limitsOf(Limits.layer))).toEqual(defaultMillis)
      expect(millis(defaults)).toEqual(defaultMillis)
    }))

  it.effect("layerWith overrides some limits and keeps the rest", () =>
    Effect.gen(function*() {
      const limits = yield* limitsOf(Limits.layerWith({ grace: Duration.millis(250), maxShells: 2 }))
      expect(millis(limits)).toEqual({ ...defaultMillis, grace: 250, maxShells: 2 })
    }))

  it.effect("layerConfig reads every CORRAL_* variable", () =>
    Effect.gen(function*() {
      const limits = yield* fromEnv({
        CORRAL_GRACE: "500ms",
        CORRAL_KILL_TIMEOUT: "2s",
        CORRAL_KILL_INTERVAL: "20ms",
        CORRAL_BUFFER_BYTES: "1024",
        CORRAL_MAX_SHELLS: "4",
        CORRAL_LIFETIME: "2m",
        CORRAL_RETENTION: "1h"
      })
      expect(millis(limits)).toEqual({
        grace: 500,
        killTimeout: 2_000,
        killInterval: 20,
        bufferBytes: 1024,
        maxShells: 4,
        lifetime: 120_000,
        retention: 3_600_000
      })
    }))

  it.effect("layerConfig keeps the defaults for unset variables, and overrides win over the environment", () =>
    Effect.gen(function*() {
      expect(millis(yield* fromEnv({}))).toEqual(defaultMillis)
      const limits = yield* fromEnv({ CORRAL_GRACE: "7", CORRAL_MAX_SHELLS: "4" }, { maxShells: 9 })
      expect(millis(limits)).toEqual({ ...defaultMillis, grace: 7_000, maxShells: 9 })
    }))

  it.effect("layerConfig fails clearly on a duration it cannot read", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(fromEnv({ CORRAL_GRACE: "abc" }))
      const message = String(error)
      expect(message).toContain("CORRAL_GRACE")
      expect(message).toContain("\"abc\"")
      expect(message).toMatch(/like 500ms, 3s, 2m or 1h/)
    }))

  it.effect("layerConfig fails clearly on a count that is not a positive integer", () =>
    Effect.gen(function*() {
      for (const value of ["0", "-3", "many", "1.5"]) {
        const error = yield* Effect.flip(fromEnv({ CORRAL_BUFFER_BYTES: value }))
        expect(String(error), value).toContain("CORRAL_BUFFER_BYTES")
      }
      const error = yield* Effect.flip(fromEnv({ CORRAL_MAX_SHELLS: "0" }))
      expect(String(error)).toContain("CORRAL_MAX_SHELLS must be a positive integer")
    }))
})

describe("DurationInput.parse", () => {
  const ok = (input: string) => Either.map(DurationInput.parse(input), Duration.toMillis)

  it("reads milliseconds, seconds, minutes and hours", () => {
    expect(ok("500ms")).toEqual(Either.right(500))
    expect(ok("3s")).toEqual(Either.right(3_000))
    expect(ok("2m")).toEqual(Either.right(120_000))
    expect(ok("1h")).toEqual(Either.right(3_600_000))
  })

  it("reads a bare number as seconds", () => {
    expect(ok("5")).toEqual(Either.right(5_000))
    expect(ok("0")).toEqual(Either.right(0))
  })

  it("reads fractions and surrounding or inner spaces", () => {
    expect(ok("1.5s")).toEqual(Either.right(1_500))
    expect(ok("0.25")).toEqual(Either.right(250))
    expect(ok(" 3 s ")).toEqual(Either.right(3_000))
    expect(ok("2.5ms")).toEqual(Either.right(3))
  })

  it("refuses anything else, naming the input and showing the form", () => {
    for (const input of ["", "abc", "-1s", "3d", "1e3", "s", "1.s", "3 seconds", "1,5s", "5S"]) {
      const message = Either.flip(DurationInput.parse(input)).pipe(Either.getOrThrowWith(() => `${input} was accepted`))
      expect(message).toContain(`"${input}"`)
      expect(message).toMatch(/use a number with an optional unit, like 500ms, 3s, 2m or 1h/)
    }
  })
})

describe("DurationInput.format", () => {
  it("writes durations the way parse reads them", () => {
    expect(DurationInput.format(Duration.millis(250))).toBe("250ms")
    expect(DurationInput.format(Duration.millis(1_500))).toBe("1.5s")
    expect(DurationInput.format(Duration.seconds(3))).toBe("3s")
    expect(DurationInput.format(Duration.seconds(150))).toBe("2m30s")
    expect(DurationInput.format(Duration.minutes(90))).toBe("1h30m")
  })
})
