/**
 * JSON that comes from outside this process: a journal on disk, a line on
 * MCP's stdin. `JSON.parse` takes any depth without recursion, but what
 * follows it recurses: `JSON.stringify`, and the error messages of a
 * `Schema` decode, which describe the value they refused. A value nested
 * some thousands of levels deep overflows the stack there, and the throw
 * escapes every `Either` and typed error on its way. So depth is checked
 * first, here, without recursion.
 */

/** Whether `value` nests arrays and objects more than `limit` levels deep. Reads it without recursion, whatever its depth. */
export const nestedDeeperThan = (value: unknown, limit: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [next, depth] = stack.pop()!
    if (typeof next !== "object" || next === null) continue
    if (depth > limit) return true
    for (const child of Object.values(next)) if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
  }
  return false
}
