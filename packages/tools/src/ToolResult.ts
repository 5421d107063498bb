/**
 * What every shell tool returns: text a person (or a model) reads as is, and
 * metadata for hosts that can carry it next to the text. Failures are results
 * too (the tools use failure mode "return"), so a bad call reaches the model
 * as an error it can act on instead of ending the conversation.
 */
import * as Schema from "effect/Schema"

export const ToolResult = Schema.Struct({
  text: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})

export type ToolResult = typeof ToolResult.Type

export const ToolErrorReason = Schema.Literal(
  "InvalidInput",
  "UnknownShell",
  "NotOwner",
  "PermissionDenied",
  "TooManyShells",
  "SpawnFailed",
  "ShuttingDown"
)

export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  reason: ToolErrorReason,
  /** Says what was wrong and what to do instead. */
  message: Schema.String
}) {}

export const invalidInput = (message: string) => new ToolError({ reason: "InvalidInput", message })
