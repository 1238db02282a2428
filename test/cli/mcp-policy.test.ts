/** The guard rails of `hyperloom mcp` that need no server (src/cli/mcp/Policy.ts): paths, programs, the budget. */
import { assert, describe, it } from "vitest"
import {
  allowListOf,
  budgetLeft,
  budgetRefusal,
  checkRefusal,
  commandRefusal,
  programOf,
  secondsLeft,
  sessionPath
} from "../../src/cli/mcp/Policy.js"

describe("the session root", () => {
  it("takes names inside it, relative or absolute", () => {
    assert.deepStrictEqual(sessionPath("/r", "s1"), { ok: true, path: "/r/s1" })
    assert.deepStrictEqual(sessionPath("/r", "a/b"), { ok: true, path: "/r/a/b" })
    assert.deepStrictEqual(sessionPath("/r", "/r/s2"), { ok: true, path: "/r/s2" })
    assert.deepStrictEqual(sessionPath("/r", "a/../s3"), { ok: true, path: "/r/s3" })
  })

  it("refuses `..`, an absolute path elsewhere, the root itself, an empty name, naming the root", () => {
    for (const name of ["..", "../x", "a/../../x", "/etc", "/r2/x", "/r", ".", "", "  "]) {
      const p = sessionPath("/r", name)
      assert.isFalse(p.ok, name)
      if (!p.ok && name.trim() !== "") assert.include(p.error, "/r", name)
    }
  })
})

describe("the allow-list", () => {
  it("reads programs comma- or space-separated, by their basename", () => {
    assert.deepStrictEqual(allowListOf(["vllm,python3", "/usr/bin/node  sglang"]), [
      "vllm",
      "python3",
      "node",
      "sglang"
    ])
  })

  it("the program of a command line skips assignments, env and exec", () => {
    assert.strictEqual(programOf("VLLM_X=1 vllm serve m"), "vllm")
    assert.strictEqual(programOf("env A=1 exec /opt/bin/python3 -m sglang"), "python3")
    assert.isUndefined(programOf("   "))
  })

  const allow = ["vllm", "node"]
  const ok = (server: string, values: ReadonlyArray<string> = [], client = ["node", "c.mjs"]) =>
    commandRefusal(allow, server, values, client)

  it("lets an allowed engine and client with placeholders and $HYPERLOOM_* through", () => {
    assert.isUndefined(ok("vllm serve m --port $HYPERLOOM_PORT --max-num-seqs {s}", ["s=64,128"]))
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's ${NAME}, not a template
    assert.isUndefined(ok("vllm serve m --port ${HYPERLOOM_PORT}"))
  })

  it("refuses a program not on the list, naming the list and the option to ask for", () => {
    const why = ok("python3 -m sglang")
    assert.include(why, "'python3' is not on the server's allow-list (vllm, node)")
    assert.include(why, "--allow-server python3")
    assert.include(ok("vllm serve m", [], ["curl", "x"]), "client program 'curl'")
    assert.include(commandRefusal([], "vllm serve m", [], ["node"]), "started without --allow-server")
  })

  it("a check is one allowed program with its arguments, as the engine is", () => {
    assert.isUndefined(checkRefusal(allow, "node examples/known-answers.mjs --url $HYPERLOOM_BASE_URL"))
    assert.include(checkRefusal(allow, "curl -s $HYPERLOOM_BASE_URL"), "the check program 'curl'")
    assert.include(checkRefusal(allow, "node a.mjs && rm -rf /"), "shell syntax")
    assert.include(checkRefusal(allow, "node $HOME/a.mjs"), "shell syntax")
    assert.include(checkRefusal(allow, "  "), "empty")
  })

  it("refuses chaining, pipes, redirections, substitutions and foreign variables, in the command or a value", () => {
    for (const server of [
      "vllm serve m; rm -rf /",
      "vllm serve m && python3 x",
      "vllm serve m | tee x",
      "vllm serve m > /etc/x",
      "vllm serve `id`",
      "vllm serve $(id)",
      "vllm serve $HOME/m",
      "vllm serve m\nrm x",
      "vllm serve m \\; x"
    ])
      assert.include(ok(server), "shell syntax", server)
    assert.include(ok("vllm serve m --x {x}", ["x=1;reboot"]), "shell syntax")
  })
})

describe("the budget", () => {
  const budget = { maxEngineStarts: 3, maxGpuHours: 1, deadlineAt: 100_000 }

  it("says what is left of each bound", () => {
    assert.deepStrictEqual(budgetLeft(budget, { engineStarts: 1, gpuSeconds: 1800 }, 40_000), {
      engine_starts: 2,
      gpu_hours: 0.5,
      deadline_sec: 60
    })
    assert.deepStrictEqual(budgetLeft({}, { engineStarts: 9, gpuSeconds: 9 }, 0), {
      engine_starts: null,
      gpu_hours: null,
      deadline_sec: null
    })
  })

  it("refuses work past it, naming what is left", () => {
    assert.isUndefined(budgetRefusal(budget, { engineStarts: 0, gpuSeconds: 0 }, 0, { starts: 3, gpus: 1 }))
    const starts = budgetRefusal(budget, { engineStarts: 1, gpuSeconds: 0 }, 0, { starts: 3, gpus: 1 })
    assert.include(starts, "needs 3 engine start(s) and the server's budget has 2 left")
    assert.include(
      budgetRefusal(budget, { engineStarts: 0, gpuSeconds: 3600 }, 0, { starts: 1, gpus: 1 }),
      "GPU hours are spent"
    )
    // no GPU: GPU hours do not bound it
    assert.isUndefined(
      budgetRefusal(budget, { engineStarts: 0, gpuSeconds: 3600 }, 0, { starts: 1, gpus: 0 })
    )
    assert.include(
      budgetRefusal(budget, { engineStarts: 0, gpuSeconds: 0 }, 100_000, { starts: 1, gpus: 1 }),
      "deadline has passed"
    )
  })

  it("bounds a run by the deadline and the GPU hours left over its engines", () => {
    // 0.5 h left over 2 GPUs x 1 engine = 900 s; the deadline is 60 s away
    assert.strictEqual(
      secondsLeft(budget, { engineStarts: 0, gpuSeconds: 1800 }, 40_000, { gpus: 2, atOnce: 1 }),
      60
    )
    assert.strictEqual(
      secondsLeft({ maxGpuHours: 1 }, { engineStarts: 0, gpuSeconds: 1800 }, 0, { gpus: 2, atOnce: 1 }),
      900
    )
    assert.isUndefined(secondsLeft({}, { engineStarts: 0, gpuSeconds: 0 }, 0, { gpus: 1, atOnce: 1 }))
  })
})
