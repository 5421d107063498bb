import { defineConfig } from "vitest/config"

const project = (name: string, include: string, testTimeout = 30_000) => ({
  test: { name, include: [include], testTimeout, hookTimeout: 30_000 }
})

export default defineConfig({
  test: {
    globalSetup: ["scripts/vitest-bundle.ts"],
    projects: [
      project("core", "packages/core/test/**/*.test.ts"),
      project("tools", "packages/tools/test/**/*.test.ts"),
      project("cli", "packages/cli/test/**/*.test.ts", 60_000),
      project("e2e", "test/**/*.test.ts", 60_000)
    ],
    // .ci/run reads the JSON report for its summary line
    reporters: ["default", ["json", { outputFile: "node_modules/.cache/corral/vitest-report.json" }]]
  }
})
