/**
 * Every bound corral enforces, in one service so hosts and tests can change
 * them and environment variables can override them.
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as DurationInput from "./DurationInput.js"

export interface LimitsShape {
  /** How long a stop waits after SIGTERM before escalating. */
  readonly grace: Duration.Duration
  /** How long the SIGKILL loop runs at most. */
  readonly killTimeout: Duration.Duration
  /** Pause between the first two SIGKILL rounds; each later pause is twice the one before. */
  readonly killInterval: Duration.Duration
  /** Output retained per shell, in bytes. */
  readonly bufferBytes: number
  /** Running shells a registry allows at once. */
  readonly maxShells: number
  /** A shell is stopped this long after it started. */
  readonly lifetime: Duration.Duration
  /** A finished shell stays readable this long, then is dropped. */
  readonly retention: Duration.Duration
}

export const defaults: LimitsShape = {
  grace: Duration.seconds(3),
  killTimeout: Duration.seconds(1),
  killInterval: Duration.millis(10),
  bufferBytes: 256 * 1024,
  maxShells: 16,
  lifetime: Duration.hours(1),
  retention: Duration.minutes(30)
}

export class Limits extends Context.Tag("@corral/core/Limits")<Limits, LimitsShape>() {
  static readonly layer: Layer.Layer<Limits> = Layer.succeed(Limits, defaults)

  static readonly layerWith = (overrides: Partial<LimitsShape>): Layer.Layer<Limits> =>
    Layer.succeed(Limits, { ...defaults, ...overrides })

  /**
   * Defaults, overridden by CORRAL_GRACE, CORRAL_KILL_TIMEOUT,
   * CORRAL_KILL_INTERVAL, CORRAL_LIFETIME, CORRAL_RETENTION (durations like
   * `3s`), CORRAL_BUFFER_BYTES and CORRAL_MAX_SHELLS, then by `overrides`.
   */
  static readonly layerConfig = (overrides: Partial<LimitsShape> = {}): Layer.Layer<Limits, ConfigError.ConfigError> =>
    Layer.effect(Limits, Effect.map(config, (fromEnv) => ({ ...fromEnv, ...overrides })))
}

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

export const config: Config.Config<LimitsShape> = Config.all({
  grace: DurationInput.config("CORRAL_GRACE").pipe(Config.withDefault(defaults.grace)),
  killTimeout: DurationInput.config("CORRAL_KILL_TIMEOUT").pipe(Config.withDefault(defaults.killTimeout)),
  killInterval: DurationInput.config("CORRAL_KILL_INTERVAL").pipe(Config.withDefault(defaults.killInterval)),
  bufferBytes: positiveInt("CORRAL_BUFFER_BYTES", defaults.bufferBytes),
  maxShells: positiveInt("CORRAL_MAX_SHELLS", defaults.maxShells),
  lifetime: DurationInput.config("CORRAL_LIFETIME").pipe(Config.withDefault(defaults.lifetime)),
  retention: DurationInput.config("CORRAL_RETENTION").pipe(Config.withDefault(defaults.retention))
})
