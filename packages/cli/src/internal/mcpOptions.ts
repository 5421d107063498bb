/**
 * `corral mcp`'s options, for `node:util`'s `parseArgs`: read by its argument
 * parser (mcpArgs.ts) and by the dispatcher, which answers `initialize`
 * before the command is loaded only for a command line that names known
 * options alone (mcpEarlyInitialize.ts). Node built-ins only.
 */
export const options = {
  cwd: { type: "string" },
  "max-shells": { type: "string" },
  grace: { type: "string" },
  containment: { type: "string" },
  shell: { type: "string" },
  name: { type: "string" },
  help: { type: "boolean", short: "h" }
} as const
