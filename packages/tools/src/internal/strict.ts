/**
 * Closed parameter schemas whose every rejection is a tool error. The
 * toolkit decodes parameters before a handler runs, and a value that does not
 * decode there fails the whole call with an `AiError`, which ends a language
 * model's turn instead of telling the model what to fix. So the toolkit is
 * given a schema any object passes, carrying the strict schema's JSON Schema
 * for the model to read, and the handler decodes with the strict one.
 */
import * as UntrustedJson from "@corral/core/UntrustedJson"
import * as Tool from "@effect/ai/Tool"
import * as Effect from "effect/Effect"
import type * as JsonSchema from "effect/JSONSchema"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import { invalidInput, type ToolError } from "../ToolResult.js"

/** Any object: what the toolkit checks before the handler has its say. */
const AnyObject = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

export interface Strict<A> {
  /** For `Tool.setParameters`: any object decodes; the JSON Schema is the strict one. */
  readonly parameters: typeof AnyObject
  readonly decode: (input: unknown) => Effect.Effect<A, ToolError>
}

export type Params<S> = S extends Strict<infer A> ? A : never

/** Issues named in one answer: a model fixes these, then hears of the rest. */
const MAX_ISSUES = 3

const quote = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value)
  return text.length <= 60 ? text : `${text.slice(0, 59)}…`
}

const fold = (name: string) => name.toLowerCase().replace(/[-_\s]/g, "")

const distance = (a: string, b: string) => {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The known name a typo most likely meant: same letters but case and separators, or two edits away. */
const closest = (name: string, known: ReadonlyArray<string>): string | undefined =>
  known.find((k) => fold(k) === fold(name)) ?? known.find((k) => distance(fold(k), fold(name)) <= 2)

const article = (type: string) => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`)

/**
 * Deepest nesting accepted in a call's arguments, whose values are flat.
 * A deeper call is refused before its decode: the message of a decode that
 * refuses a value describes it, recursing as deep, and some thousands of
 * levels overflowed the stack there (see `UntrustedJson`).
 */
const MAX_DEPTH = 16

/** A tool's parameters, as its refusals name them. */
interface ToolParameters {
  readonly known: ReadonlyArray<string>
  readonly strict: Schema.Schema.Any
  /** The JSON Schema type of each, which a refusal says a value must be. */
  readonly types: Record<string, { readonly type?: string }>
}

const descriptionOf = (parameters: ToolParameters, key: string) =>
  Option.getOrUndefined(
    AST.getDescriptionAnnotation((parameters.strict.ast as AST.TypeLiteral).propertySignatures.find((p) => p.name === key)!.type)
  )

const explain = (parameters: ToolParameters, issue: ParseResult.ArrayFormatterIssue, input: Record<string, unknown>): string => {
  const key = String(issue.path[0])
  switch (parameters.known.includes(key) ? issue._tag : "Unexpected") {
    case "Unexpected": {
      const meant = closest(key, parameters.known)
      return `unknown parameter ${quote(key)}${meant === undefined ? "" : ` (did you mean ${meant}?)`}`
    }
    case "Missing": {
      const what = descriptionOf(parameters, key)
      return `${key} is missing${what === undefined ? "" : `: ${what.charAt(0).toLowerCase()}${what.slice(1).replace(/\.$/, "")}`}`
    }
    default: {
      const type = parameters.types[key]?.type
      return type === undefined ? `${key}: ${issue.message}` : `${key} must be ${article(type)}; got ${quote(input[key])}`
    }
  }
}

/** What is wrong with `input`: the first `MAX_ISSUES` of its issues, each said once. */
const wrongWith = (parameters: ToolParameters, input: unknown, error: ParseResult.ParseError) => {
  const given = (typeof input === "object" && input !== null ? input : {}) as Record<string, unknown>
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  // an issue at the top (not an object) has no parameter to name
  const named = issues.filter((i) => i.path.length > 0)
  const lines = [...new Set(named.map((i) => explain(parameters, i, given)))]
  const more = lines.length > MAX_ISSUES ? `; and ${lines.length - MAX_ISSUES} more` : ""
  return lines.length === 0 ? `the arguments must be an object; got ${quote(input)}` : lines.slice(0, MAX_ISSUES).join("; ") + more
}

/**
 * `tool` with `fields`, closed. `required` overrides the JSON Schema's list,
 * for a parameter the model must send that an alias may stand in for.
 */
export const make = <Fields extends Schema.Struct.Fields>(
  tool: string,
  fields: Fields,
  options: { readonly required?: ReadonlyArray<keyof Fields & string> } = {}
): Strict<Schema.Struct.Type<Fields>> => {
  const known = Object.keys(fields)
  // `{}` is any value but null in Effect Schema: no parameters is a record of nothing
  const strict: Schema.Schema.Any = known.length === 0
    ? Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Never }))
    : Schema.Struct(fields)
  const json: JsonSchema.JsonSchema7Object = known.length === 0
    ? { type: "object", required: [], properties: {}, additionalProperties: false }
    : Tool.getJsonSchemaFromSchemaAst(strict.ast) as JsonSchema.JsonSchema7Object
  const jsonSchema = options.required === undefined ? json : { ...json, required: [...options.required] }
  const parameters: ToolParameters = { known, strict, types: json.properties as ToolParameters["types"] }
  const takes = known.length === 0
    ? `${tool} takes no parameters: call it with {}`
    : `${tool} takes ${known.map((k) => (jsonSchema.required.includes(k) ? `${k} (required)` : k)).join(", ")}`

  // the fields are plain values: decoding them needs no service
  const decodeStrict = Schema.decodeUnknown(strict, { errors: "all", onExcessProperty: "error" }) as (
    input: unknown
  ) => Effect.Effect<Schema.Struct.Type<Fields>, ParseResult.ParseError>
  return {
    parameters: AnyObject.annotations({ jsonSchema }),
    decode: (input) => {
      if (UntrustedJson.nestedDeeperThan(input, MAX_DEPTH)) {
        return invalidInput(`invalid arguments for ${tool}: they nest values over ${MAX_DEPTH} levels deep. ${takes}.`)
      }
      return decodeStrict(input).pipe(Effect.catchTag("ParseError", (error) =>
        invalidInput(`invalid arguments for ${tool}: ${wrongWith(parameters, input, error)}. ${takes}.`)
      ))
    }
  }
}
