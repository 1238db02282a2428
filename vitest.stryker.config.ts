import { defineConfig } from "vitest/config"

// Mutation testing (`npm run test:mutation`, stryker.config.json) runs only the pure domain tests:
// they need no Ray, no I/O, and finish in about a second, so every mutant gets the full suite.
export default defineConfig({
  test: {
    include: ["test/domain/**/*.test.ts"],
    testTimeout: 20_000
  }
})
