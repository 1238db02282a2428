import { defineConfig } from "vitest/config"

// Two projects: fast unit tests (parallel, no Ray) and real-Ray tests, which own the host's Ray
// (`ray stop --force` kills every Ray process) and therefore run one file at a time, one test at a time.
export default defineConfig({
  test: {
    // The pools' options are the run's, not a project's (vitest makes one pool of each kind): only
    // the unit project uses threads. No unit test mocks a module or leaves a global or process.env
    // changed, so its files share their worker's modules.
    poolOptions: { threads: { isolate: false } },
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: ["test/ray/**", "test/consumer/**", "node_modules/**"],
          // yields to the worker's event loop after each test (why: in the file)
          setupFiles: ["test/support/unitSetup.ts"],
          // removes the folders the test executable was built in (test/support/bundle.ts)
          globalSetup: ["test/support/unitGlobalSetup.ts"],
          // Worker threads without isolation (the run's poolOptions above): one worker evaluates the sources
          // (Effect and the rest) once for all the files, not once per file in a process of its own.
          pool: "threads",
          testTimeout: 20_000,
          // the first CLI test file's beforeAll builds the executable the others then share
          // (test/support/bundle.ts): seconds of CPU, minutes of wall on a loaded machine
          hookTimeout: 180_000
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
