#!/usr/bin/env node
// A stand-in for a serving benchmark (vLLM / SGLang bench), for trying `hyperloom baseline run`
// without GPUs or a model. Node, no dependencies.
//
//   node examples/fake-serving-bench.mjs [options]
//
// By default it prints a few progress lines, sleeps a little, writes {"throughput": N} to the file
// named by $HYPERLOOM_RESULT_FILE and exits 0. It prints the CUDA_VISIBLE_DEVICES it sees (set by
// Ray for the lease's GPUs).
//
// Options:
//   --throughput=N     the throughput to report (default 1234.5)
//   --sleep=S          seconds of "benchmarking" (default 0.5)
//   --fail=KIND        fail instead, like a real benchmark would:
//                        arg-error  "error: unrecognized arguments: --bogus", exit 2, at once
//                        oom        a KV-cache out-of-memory error, exit 1
//                        crash      a crash whose pid, port and hex ids change every run, exit 1
//                        random     a different failure message each run, exit 1
//   --fail-until=FILE  fail (like `crash`) until FILE exists, then succeed (an enablement command
//                      that creates FILE "fixes" the setup)
//   --no-report        exit 0 without writing a result
//   --tag=WORD         ignored; lets a test find this process by its argv
// The environment variable FAKE_BENCH_FAIL=KIND works like --fail=KIND.
import { randomBytes, randomUUID } from "node:crypto"
import { existsSync, writeFileSync } from "node:fs"

const options = { throughput: 1234.5, sleep: 0.5, fail: process.env.FAKE_BENCH_FAIL || "", failUntil: "", report: true }
for (const arg of process.argv.slice(2)) {
  const [key, value = ""] = arg.split(/=(.*)/s)
  if (key === "--throughput") options.throughput = Number(value)
  else if (key === "--sleep") options.sleep = Number(value)
  else if (key === "--fail") options.fail = value
  else if (key === "--fail-until") options.failUntil = value
  else if (key === "--no-report") options.report = false
  else if (key === "--tag") continue
  else {
    console.error(`fake-serving-bench: error: unknown option ${arg}`)
    process.exit(2)
  }
}

const say = (line) => console.log(`fake-serving-bench: ${line}`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const hex = (bytes) => randomBytes(bytes).toString("hex")
const attempt = process.env.HYPERLOOM_ATTEMPT ?? "?"

if (options.fail === "arg-error") {
  console.error("usage: fake-serving-bench [-h] [--model MODEL] [--tp N]")
  console.error("fake-serving-bench: error: unrecognized arguments: --bogus")
  process.exit(2)
}

say(`attempt ${attempt}; CUDA_VISIBLE_DEVICES=${process.env.CUDA_VISIBLE_DEVICES ?? "(unset)"}`)
say("loading model fake/llama-tiny")
const steps = 4
for (let i = 1; i <= steps; i++) {
  await sleep((options.sleep * 1000) / steps)
  say(`warmup ${i}/${steps}`)
}

const crash = () => {
  const port = 20000 + Math.floor(Math.random() * 40000)
  console.error(
    `RuntimeError: worker pid ${process.pid} lost its connection to 127.0.0.1:${port} ` +
      `(actor ${hex(16)}, request 0x${hex(4)}, trace ${randomUUID()})`
  )
  process.exit(1)
}

if (options.failUntil !== "" && !existsSync(options.failUntil)) {
  say(`setup not ready: ${options.failUntil} is missing`)
  crash()
}

switch (options.fail) {
  case "":
    break
  case "oom":
    console.error(
      "ValueError: No available memory for the cache blocks: the model weights leave no GPU memory for the KV cache. " +
        "Try increasing `gpu_memory_utilization` or raise --mem-fraction-static above 0.88."
    )
    process.exit(1)
    break
  case "crash":
    crash()
    break
  case "random": {
    const words = ["tokenizer", "scheduler", "sampler", "detokenizer", "router", "engine", "cache", "loader"]
    const faults = ["deadlocked", "segfaulted", "overflowed", "desynchronised", "stalled", "diverged"]
    const pick = (list) => list[Math.floor(Math.random() * list.length)]
    const n = Number(attempt)
    // A different message each run: the attempt number picks the component, randomness the rest.
    const what = Number.isInteger(n) ? words[(n - 1) % words.length] : pick(words)
    console.error(`fatal: the ${what} ${pick(faults)} while ${pick(["warming up", "serving", "draining"])}`)
    process.exit(1)
    break
  }
  default:
    console.error(`fake-serving-bench: error: unknown failure kind ${options.fail}`)
    process.exit(2)
}

const throughput = options.throughput
say(`benchmark done: ${throughput} tokens/s`)
if (options.report) {
  const file = process.env.HYPERLOOM_RESULT_FILE
  if (file) writeFileSync(file, `${JSON.stringify({ throughput })}\n`)
  else say("HYPERLOOM_RESULT_FILE is not set; not writing a result")
}
process.exit(0)
