export * as CommandShell from "./CommandShell.js"
export * from "./Containment.js"
export * as DurationInput from "./DurationInput.js"
export * as GroupStop from "./GroupStop.js"
export * from "./Limits.js"
export * as OutputBuffer from "./OutputBuffer.js"
export * as ProcessGroup from "./ProcessGroup.js"
export * from "./ProcessTable.js"
export * as Journal from "./Journal.js"
export * from "./ShellRegistry.js"
export * as StateDir from "./StateDir.js"
export * as Watcher from "./Watcher.js"
// ControlServer and ControlClient pull in an HTTP stack: import them from
// "@corral/core/ControlServer" and "@corral/core/ControlClient".
