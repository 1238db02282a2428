import { defineConfig } from "vitest/config"

// Two projects: fast unit tests (parallel, no Ray) and real-Ray tests, which own the host's Ray
// (`ray stop --force` kills every Ray process) and therefore run one file at a time, one test at a time.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: ["test/ray/**", "test/consumer/**", "node_modules/**"],
          // yields to the worker's event loop after each test (why: in the file)
          setupFiles: ["test/support/unitSetup.ts"],
          testTimeout: 20_000
        }
      },
      {
        // installs the packed package into a consumer project (needs the build and the registry)
        test: {
          name: "consumer",
          include: ["test/consumer/**/*.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 300_000
        }
      },
      {
        test: {
          name: "ray",
          include: ["test/ray/**/*.test.ts"],
          globalSetup: ["test/ray/globalSetup.ts"],
          fileParallelism: false,
          pool: "forks",
          poolOptions: { forks: { singleFork: true } },
          sequence: { concurrent: false },
          testTimeout: 180_000,
          hookTimeout: 120_000
        }
      }
    ]
  }
})
