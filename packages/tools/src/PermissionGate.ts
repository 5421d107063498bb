/**
 * The host's say on which commands an agent may run. `bash` asks it before
 * starting anything, foreground or background, with the subject
 * `bash <command>`; `bash_output` and `list_shells` only read, and `kill_bash`
 * only reaches the caller's own shells, so neither is gated.
 *
 * A host with a user interface resolves "ask" inside `check` (it prompts and
 * answers allow or deny). An `Ask` that reaches the tools means the host
 * could not ask anyone, as with an MCP server on stdio: the tools refuse the
 * call and tell the model the user has to allow it first, with the host's hint
 * on how.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export type Decision = Data.TaggedEnum<{
  Allow: {}
  Deny: { readonly reason: string }
  /** `hint` tells the user how to allow it, e.g. which setting to change. */
  Ask: { readonly hint?: string | undefined }
}>

export const Decision = Data.taggedEnum<Decision>()

export class PermissionGate extends Context.Tag("@corral/tools/PermissionGate")<PermissionGate, {
  readonly check: (tool: string, subject: string) => Effect.Effect<Decision>
}>() {
  /** Allows everything: the host's own approval (an MCP client's, say) is the gate. */
  static readonly layer: Layer.Layer<PermissionGate> = Layer.succeed(
    PermissionGate,
    PermissionGate.of({ check: () => Effect.succeed(Decision.Allow()) })
  )

  static readonly layerWith = (check: (tool: string, subject: string) => Effect.Effect<Decision>): Layer.Layer<PermissionGate> =>
    Layer.succeed(PermissionGate, PermissionGate.of({ check }))
}
