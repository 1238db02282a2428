/**
 * Setup of every unit test file (vitest.config.ts). Tests that start the CLI synchronously
 * (spawnSync) keep their worker's event loop busy while they run, and vitest's runner goes from one
 * test to the next on microtasks alone: the main process's replies to the worker's RPC calls (the
 * task updates it sends as tests end) are not read until the file's whole synchronous stretch is
 * over. A file of such tests that takes over 60 s on a loaded machine (test/cli/strict.test.ts, at
 * a load average of 7) misses birpc's deadline: an unhandled `Timeout calling "onTaskUpdate"` fails
 * the run though every test passed. So after each test the worker yields to its event loop once
 * (the real setImmediate, taken before any test could fake timers), and the replies are read
 * between tests: only one test's stretch counts.
 */
import { afterEach } from "vitest"

const realSetImmediate = globalThis.setImmediate

afterEach(() => new Promise<void>((resolve) => realSetImmediate(() => resolve())))
