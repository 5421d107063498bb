// The unshare flags that make a PID namespace for this user, or undefined
// where none can be made. Root makes a plain one; anyone else, where
// unprivileged user namespaces are allowed, one owned by a user namespace that
// maps only their own uid, so they keep exactly their permissions inside.
import { spawnSync } from "node:child_process"

const flavours = [
  ["--pid", "--fork", "--mount-proc"],
  ["--user", "--map-current-user", "--pid", "--fork", "--mount-proc"]
]

export const pidnsFlags = () => flavours.find((flags) => spawnSync("unshare", [...flags, "true"], { stdio: "ignore" }).status === 0)
