#!/usr/bin/env node
// No function in packages/*/src runs past MAX_LINES lines (issue 15: "no function runs past about 60 lines").
// A function is counted from its first line to its last, the closures it holds included: a factory that keeps
// its state in one long closure is one long function. Class methods count one by one.
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

const MAX_LINES = 60
const roots = ["packages/core/src", "packages/tools/src", "packages/cli/src"]

const sources = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(full)
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [full] : []
  })

const isFunction = (node) =>
  ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)

const tooLong = []
for (const file of roots.flatMap(sources)) {
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const visit = (node) => {
    if (isFunction(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line
      if (last - first + 1 > MAX_LINES) tooLong.push(`${file}:${first + 1}: a function of ${last - first + 1} lines`)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
}

if (tooLong.length > 0) {
  console.error(`function-length: ${tooLong.length} function(s) over ${MAX_LINES} lines; split each along its concepts:`)
  tooLong.forEach((line) => console.error(`  ${line}`))
  process.exit(1)
}
console.log(`function-length: no function in ${roots.join(", ")} over ${MAX_LINES} lines`)
