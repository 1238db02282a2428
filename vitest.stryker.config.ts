import { defineConfig } from "vitest/config"

// Mutation testing (`npm run test:mutation`, stryker.config.json) runs the tests that need no Ray:
// the pure domain tests, the repair and ensure programs through test layers (the repair gate, the
// re-check before the stop, the guard wiring) and the /proc reader (its error handling). They
// finish in seconds, so every mutant gets them all.
export default defineConfig({
  test: {
    include: [
      "test/domain/**/*.test.ts",
      "test/programs/Cluster.test.ts",
      "test/services/ProcFs.test.ts"
    ],
    testTimeout: 20_000
  }
})
