/**
 * Tool definitions without a provider's wrapping, for hosts that call model
 * APIs directly: a name, the description the model reads, and the parameters
 * as a JSON Schema (draft-07) object.
 */
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import type * as JsonSchema from "effect/JSONSchema"

export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema.JsonSchema7
}

/** The parameters' JSON Schema, with `$defs` when the schema needs them. */
export const parametersOf = (tool: Tool.Any): JsonSchema.JsonSchema7 => Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast)

export const fromTool = (tool: Tool.Any): ToolDefinition => ({
  name: tool.name,
  description: tool.description ?? "",
  parameters: parametersOf(tool)
})

export const fromToolkit = (toolkit: Toolkit.Any): ReadonlyArray<ToolDefinition> => Object.values(toolkit.tools).map(fromTool)
