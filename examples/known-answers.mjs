#!/usr/bin/env node
/**
 * A correctness probe for `--check` (Node, no dependencies): asks the engine at
 * $HYPERLOOM_BASE_URL (or --base-url) each prompt of engine-model.mjs's KNOWN_PROMPTS ("The capital
 * of France is", "2 + 2 =", ...) with greedy decoding, and exits 1 with the first wrong answer
 * ("wrong: '2 + 2 =' answered ' 5', expected ' 4'") or 0 when every answer is right. The stand-in
 * engine answers them right, and wrong under --quantization fp8 (--fail=wrong-fast).
 *
 *   node examples/known-answers.mjs [--base-url URL] [--model NAME]
 */
import { KNOWN_PROMPTS } from "./engine-model.mjs"

const args = process.argv.slice(2)
const opt = (name, fallback) => {
  const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (i < 0) return fallback
  return args[i].includes("=") ? args[i].slice(args[i].indexOf("=") + 1) : (args[i + 1] ?? fallback)
}
const base = opt("base-url", process.env.HYPERLOOM_BASE_URL ?? "http://127.0.0.1:8000")

const main = async () => {
  const model = opt("model", undefined) ?? (await (await fetch(`${base}/v1/models`)).json()).data[0].id
  for (const k of KNOWN_PROMPTS) {
    const r = await fetch(`${base}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: k.prompt, max_tokens: 2, temperature: 0, stream: false })
    })
    if (!r.ok) throw new Error(`HTTP ${r.status} for '${k.prompt}'`)
    const text = (await r.json()).choices[0].text
    if (!text.startsWith(k.answer)) {
      console.log(`wrong: '${k.prompt}' answered '${text}', expected '${k.answer}'`)
      process.exit(1)
    }
    console.log(`right: '${k.prompt}' answered '${text}'`)
  }
}
main().catch((e) => {
  console.log(`known-answers: ${e.message}`)
  process.exit(2)
})
