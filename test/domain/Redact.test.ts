import { assert, describe, it } from "@effect/vitest"
import { REDACTED, redactArgv, redactText } from "../../src/domain/Redact.js"
import { baselineSpec, specDifferences } from "../../src/domain/SessionSpec.js"

describe("redaction of known secret shapes (issue 27 item 7)", () => {
  it.each([
    ["vllm serve M --api-key sk-abc123def456ghi --port 8000", "vllm serve M --api-key REDACTED --port 8000"],
    ["vllm serve M --api-key=secretvalue --port 8000", "vllm serve M --api-key=REDACTED --port 8000"],
    ["vllm serve M --api-key 'two words' --x 1", "vllm serve M --api-key REDACTED --x 1"],
    ["HF_TOKEN=hf_abcdefghijklmnop vllm serve M", "HF_TOKEN=REDACTED vllm serve M"],
    ['env OPENAI_API_KEY=xyz MY_SECRET="a b" run', "env OPENAI_API_KEY=REDACTED MY_SECRET=REDACTED run"],
    [
      "python -m sglang.launch_server --token abc --model-path m",
      "python -m sglang.launch_server --token REDACTED --model-path m"
    ],
    ["client --hf-token t0k3n", "client --hf-token REDACTED"],
    ["curl -H 'Authorization: Bearer abcdefghijkl' x", "curl -H 'Authorization: Bearer REDACTED' x"],
    ["echo sk-proj-ABCDEFGH12345678 done", "echo REDACTED done"]
  ])("%s", (text, want) => {
    assert.strictEqual(redactText(text), want)
  })

  it("ordinary command lines stay as written", () => {
    for (const text of [
      "vllm serve M --max-num-seqs 8 --port $HYPERLOOM_PORT --max-num-batched-tokens 2048",
      "CUDA_VISIBLE_DEVICES=0 sglang --tokenizer-mode auto --mem-fraction-static 0.8",
      "vllm bench serve --max-concurrency {c} --random-input-len 1024"
    ])
      assert.strictEqual(redactText(text), text)
  })

  it("argv: the element after a secret option, and secret shapes inside elements", () => {
    assert.deepStrictEqual(redactArgv(["bench", "--api-key", "sk-1234567890", "--token=x", "--n", "5"]), [
      "bench",
      "--api-key",
      REDACTED,
      "--token=REDACTED",
      "--n",
      "5"
    ])
  })
})

describe("a baseline session keeps its command redacted (issue 27 item 7)", () => {
  it("state.json's spec holds the redacted command and server; the same command compares equal", () => {
    const options = {
      argv: ["vllm", "bench", "serve", "--api-key", "sk-abcdefgh12345678"],
      request: { gpus: 1, servingSlot: true },
      serving: { server: "vllm serve m --api-key sk-abcdefgh12345678", readiness: { path: "/health" } }
    }
    const spec = baselineSpec(options)
    assert.notInclude(JSON.stringify(spec), "sk-abcdefgh12345678")
    assert.strictEqual(spec.server, "vllm serve m --api-key REDACTED")
    assert.deepStrictEqual(specDifferences(spec, baselineSpec(options)), [])
  })
})
