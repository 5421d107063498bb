/**
 * What a failed spawn's error code means to the user, and what to do about
 * it: the words of a `SpawnError`, and of the warning of a watcher that
 * could not start.
 */

/** `pipes`: whose pipes a spawn out of descriptors had none for. */
export const describe = (code: string, pipes = "the command's pipes"): string => {
  switch (code) {
    case "ENOENT":
      return "not found: check the name and PATH"
    case "EACCES":
      return "permission denied: check that it is executable"
    case "EISDIR":
      return "it is a directory: pass a program or a script"
    case "ELOOP":
      return "too many levels of symbolic links (ELOOP): fix the link"
    case "ENAMETOOLONG":
      return "the name is too long (ENAMETOOLONG): pass a shorter path"
    case "ENOTDIR":
      return "a part of the path is not a directory (ENOTDIR): check the path"
    case "EAGAIN":
      return "no process can be started now (EAGAIN: the user's process limit, `ulimit -u`, or the system's pid limit is reached): stop some processes or raise the limit"
    case "EMFILE":
      return `this process has no file descriptor left for ${pipes} (EMFILE: \`ulimit -n\` is reached): close some files or raise the limit`
    case "ENFILE":
      return `the system has no file descriptor left for ${pipes} (ENFILE): close some files or raise fs.file-max`
    case "ENOMEM":
      return "not enough memory to start it (ENOMEM)"
    default:
      return `spawn failed (${code})`
  }
}
