/**
 * @corral/tools: background shells as tools for AI agents (@effect/ai, MCP, ACP).
 *
 * @since 0.1.0
 */

/**
 * Background shells as Agent Client Protocol tool-call rows.
 *
 * @since 0.1.0
 */
export * as AcpShellRows from "./AcpShellRows.js"

/**
 * The shell tools on an `@effect/ai` `McpServer`, results as plain text.
 *
 * @since 0.1.0
 */
export * as McpTools from "./McpTools.js"

/**
 * The host's say on which commands an agent may run.
 *
 * @since 0.1.0
 */
export * from "./PermissionGate.js"

/**
 * Output as a screen shows it: each line as a terminal leaves it, redraws and erasures applied.
 *
 * @since 0.1.0
 */
export * as ScreenText from "./ScreenText.js"

/**
 * `bash`, `bash_output`, `kill_bash` and `list_shells` as one `@effect/ai` toolkit.
 *
 * @since 0.1.0
 */
export * as ShellTools from "./ShellTools.js"

/**
 * Tool definitions without a provider's wrapping, for hosts that call models themselves.
 *
 * @since 0.1.0
 */
export * as ToolDefinition from "./ToolDefinition.js"

/**
 * What every shell tool returns: text to read as is, and structured `_meta`.
 *
 * @since 0.1.0
 */
export * from "./ToolResult.js"
