#!/usr/bin/env node
/**
 * A stand-in `nvidia-smi` and `amd-smi` (Node, no dependencies) for a machine without GPUs: it
 * answers the queries hyperloom's samplers and its clean-GPU gate make, in the real tools'
 * output formats, about made-up GPUs whose state can change mid-run (a clock that drops with a
 * throttle reason, a foreign compute process that appears). Install it on PATH:
 *
 *   node examples/fake-gpu-tool.mjs install DIR [--gpus N] [--clock MHZ]
 *        [--throttle-after S] [--throttled-clock MHZ] [--throttle-reason NAME]
 *        [--foreign-after S] [--foreign-pid PID] [--foreign-name NAME] [--foreign-gpu I]
 *        [--foreign-mib MIB]
 *
 * writes DIR/nvidia-smi and DIR/amd-smi (two-line shell wrappers that run this file) and
 * DIR/scenario.json, and prints `PATH=DIR:$PATH`-style text to use. Time counts from the first
 * GPU query that asks for clocks (`--query-gpu=...clocks...` or `amd-smi metric`: a sampler's
 * first sample), so "after S" is S seconds into the first sampled run, whatever the engine's load
 * time; nothing foreign is listed before then (the clean-GPU gate, which runs earlier, sees an
 * idle GPU). The default GPUs run at 1980 MHz, 45 C, 300 W, and no throttle reason is active.
 *
 * Queries answered (the forms and formats of the real tools):
 *   nvidia-smi --query-gpu=F1,F2,... --format=csv[,noheader][,nounits]
 *       fields: index, uuid, name, clocks.sm (clocks.current.sm), clocks.max.sm,
 *       clocks_event_reasons.active (clocks_throttle_reasons.active: the older name; a
 *       0x%016x bitmask, NVML's nvmlClocksEventReason* bits: 0x1 gpu_idle, 0x4 sw_power_cap,
 *       0x8 hw_slowdown, 0x20 sw_thermal_slowdown, 0x40 hw_thermal_slowdown, 0x80
 *       hw_power_brake_slowdown), temperature.gpu, power.draw, memory.used, memory.total,
 *       utilization.gpu; units (MHz, W, MiB, %) unless `nounits`; an unknown field prints
 *       `Field "X" is not a valid field to query.` and exits 2, as nvidia-smi does
 *   nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv[,...]
 *       the foreign process once due, then DIR/apps verbatim (test/support/fakeGpuTools.ts's file)
 *   amd-smi metric --json      a list of {"gpu": N, "power": {"socket_power": {value, unit},
 *       "throttle_status": "THROTTLED"|"UNTHROTTLED", ...}, "clock": {"gfx_0": {"clk": {value,
 *       unit}, ...}}, "temperature": {"edge", "hotspot", "mem"}} as amdsmi_cli's `metric` writes
 *   amd-smi process --json     as amdsmi_cli's `process` (test/fixtures/gpu/README.md), the foreign
 *       process once due; DIR/amd (and its exit code in DIR/amd.rc) instead when present
 * Anything else: "unexpected arguments" on stderr, exit 2.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const self = fileURLToPath(import.meta.url)
const argv = process.argv.slice(2)

/** UUIDs of the made-up GPUs: the first two are test/fixtures/gpu/nvidia-smi-gpus.csv's. */
const UUIDS = ["GPU-5e5c2c7e-8a49-7d3b-4d7e-0e6f4c1b9a21", "GPU-a1f3b0c2-1d2e-4f5a-8b9c-3d4e5f6a7b8c"]
const uuid = (i) => UUIDS[i] ?? `GPU-00000000-0000-4000-8000-${String(i).padStart(12, "0")}`

/** NVML's clocks event reason bits (nvml.h nvmlClocksEventReason*). */
const REASON_BITS = {
  gpu_idle: 0x1,
  applications_clocks_setting: 0x2,
  sw_power_cap: 0x4,
  hw_slowdown: 0x8,
  sync_boost: 0x10,
  sw_thermal_slowdown: 0x20,
  hw_thermal_slowdown: 0x40,
  hw_power_brake_slowdown: 0x80,
  display_clock_setting: 0x100
}

const DEFAULTS = {
  gpus: 2,
  clock: 1980,
  throttleAfter: null,
  throttledClock: 1410,
  throttleReason: "sw_thermal_slowdown",
  foreignAfter: null,
  foreignPid: 1,
  foreignName: "python3",
  foreignGpu: 0,
  foreignMib: 20480
}

const flag = (args, name) => {
  const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (i < 0) return undefined
  return args[i].includes("=") ? args[i].slice(args[i].indexOf("=") + 1) : args[i + 1]
}

if (argv[0] === "install") {
  const dir = argv[1]
  if (dir === undefined || dir.startsWith("--")) {
    console.error("usage: fake-gpu-tool.mjs install DIR [options]   (read this file's header)")
    process.exit(2)
  }
  const rest = argv.slice(2)
  const num = (name, fallback) => {
    const v = flag(rest, name)
    if (v === undefined) return fallback
    const n = Number(v)
    if (v === "" || !Number.isFinite(n) || n < 0) {
      console.error(`fake-gpu-tool: --${name}: not a number: '${v}'`)
      process.exit(2)
    }
    return n
  }
  const reason = flag(rest, "throttle-reason") ?? DEFAULTS.throttleReason
  if (!(reason in REASON_BITS)) {
    console.error(`fake-gpu-tool: --throttle-reason: one of ${Object.keys(REASON_BITS).join(", ")}`)
    process.exit(2)
  }
  const scenario = {
    gpus: num("gpus", DEFAULTS.gpus),
    clock: num("clock", DEFAULTS.clock),
    throttleAfter: num("throttle-after", DEFAULTS.throttleAfter),
    throttledClock: num("throttled-clock", DEFAULTS.throttledClock),
    throttleReason: reason,
    foreignAfter: num("foreign-after", DEFAULTS.foreignAfter),
    foreignPid: num("foreign-pid", DEFAULTS.foreignPid),
    foreignName: flag(rest, "foreign-name") ?? DEFAULTS.foreignName,
    foreignGpu: num("foreign-gpu", DEFAULTS.foreignGpu),
    foreignMib: num("foreign-mib", DEFAULTS.foreignMib)
  }
  fs.mkdirSync(dir, { recursive: true })
  const abs = path.resolve(dir)
  fs.writeFileSync(path.join(abs, "scenario.json"), `${JSON.stringify(scenario, null, 2)}\n`)
  fs.rmSync(path.join(abs, "started"), { force: true })
  const q = (s) => `'${s.replaceAll("'", `'\\''`)}'`
  for (const tool of ["nvidia-smi", "amd-smi"]) {
    fs.writeFileSync(
      path.join(abs, tool),
      `#!/bin/sh\nexec ${q(process.execPath)} ${q(self)} ${tool} ${q(abs)} "$@"\n`,
      { mode: 0o755 }
    )
  }
  console.log(`PATH=${abs}:$PATH`)
  process.exit(0)
}

const [tool, dir, ...args] = argv
if ((tool !== "nvidia-smi" && tool !== "amd-smi") || dir === undefined) {
  console.error("usage: fake-gpu-tool.mjs install DIR [options]   (read this file's header)")
  process.exit(2)
}
const file = (name) => path.join(dir, name)
const readOr = (name, fallback) => {
  try {
    return fs.readFileSync(file(name), "utf8")
  } catch {
    return fallback
  }
}
const scenario = { ...DEFAULTS, ...JSON.parse(readOr("scenario.json", "{}")) }
const unexpected = () => {
  console.error(`fake ${tool}: unexpected arguments: ${args.join(" ")}`)
  process.exit(2)
}

/** Seconds since the first clocks query; starts the clock when `start` is set. */
const elapsed = (start) => {
  let t0 = Number(readOr("started", "NaN"))
  if (!Number.isFinite(t0)) {
    if (!start) return null
    t0 = Date.now()
    try {
      fs.writeFileSync(file("started"), String(t0), { flag: "wx" })
    } catch {
      t0 = Number(readOr("started", String(t0)))
    }
  }
  return (Date.now() - t0) / 1000
}
const due = (after, t) => after !== null && after !== undefined && t !== null && t >= after

/** The state of GPU i at t seconds. */
const gpu = (i, t) => {
  const throttled = due(scenario.throttleAfter, t)
  return {
    index: i,
    uuid: uuid(i),
    name: "NVIDIA H100 80GB HBM3",
    clock: throttled ? scenario.throttledClock : scenario.clock,
    maxClock: scenario.clock,
    reasons: throttled ? REASON_BITS[scenario.throttleReason] : 0,
    temperature: throttled ? 87 : 45,
    power: throttled ? 349.5 : 300.25,
    memUsed: due(scenario.foreignAfter, t) && scenario.foreignGpu === i ? scenario.foreignMib : 0,
    memTotal: 81559,
    util: 0
  }
}
const gpus = (t) => Array.from({ length: scenario.gpus }, (_, i) => gpu(i, t))
const foreignDue = (t) => due(scenario.foreignAfter, t) && scenario.foreignGpu < scenario.gpus

if (tool === "nvidia-smi") {
  const query = args.find((a) => a.startsWith("--query-gpu=") || a.startsWith("--query-compute-apps="))
  const format = args.find((a) => a.startsWith("--format="))
  if (query === undefined || format === undefined) unexpected()
  const opts = format.slice("--format=".length).split(",")
  if (!opts.includes("csv")) unexpected()
  const units = !opts.includes("nounits")
  const header = !opts.includes("noheader")
  const fields = query
    .slice(query.indexOf("=") + 1)
    .split(",")
    .map((f) => f.trim())
  const u = (v, unit) => (units ? `${v} ${unit}` : String(v))
  if (query.startsWith("--query-gpu=")) {
    const value = {
      index: (g) => String(g.index),
      uuid: (g) => g.uuid,
      name: (g) => g.name,
      "clocks.sm": (g) => u(g.clock, "MHz"),
      "clocks.current.sm": (g) => u(g.clock, "MHz"),
      "clocks.max.sm": (g) => u(g.maxClock, "MHz"),
      "clocks_event_reasons.active": (g) => `0x${g.reasons.toString(16).padStart(16, "0")}`,
      "clocks_throttle_reasons.active": (g) => `0x${g.reasons.toString(16).padStart(16, "0")}`,
      "temperature.gpu": (g) => String(g.temperature),
      "power.draw": (g) => u(g.power.toFixed(2), "W"),
      "memory.used": (g) => u(g.memUsed, "MiB"),
      "memory.total": (g) => u(g.memTotal, "MiB"),
      "utilization.gpu": (g) => u(g.util, "%")
    }
    const bad = fields.find((f) => !(f in value))
    if (bad !== undefined) {
      console.log(`Field "${bad}" is not a valid field to query.`)
      process.exit(2)
    }
    const clocks = fields.some((f) => f.startsWith("clocks"))
    const t = elapsed(clocks)
    const lines = []
    if (header) lines.push(fields.join(", "))
    for (const g of gpus(t)) lines.push(fields.map((f) => value[f](g)).join(", "))
    process.stdout.write(`${lines.join("\n")}\n`)
  } else {
    const value = {
      pid: (p) => String(p.pid),
      process_name: (p) => p.name,
      name: (p) => p.name,
      gpu_uuid: (p) => uuid(p.gpu),
      used_memory: (p) => u(p.mib, "MiB"),
      used_gpu_memory: (p) => u(p.mib, "MiB")
    }
    const bad = fields.find((f) => !(f in value))
    if (bad !== undefined) {
      console.log(`Field "${bad}" is not a valid field to query.`)
      process.exit(2)
    }
    const t = elapsed(false)
    const lines = []
    if (header) lines.push(fields.join(", "))
    if (foreignDue(t)) {
      const p = { pid: scenario.foreignPid, name: scenario.foreignName, gpu: scenario.foreignGpu, mib: scenario.foreignMib }
      lines.push(fields.map((f) => value[f](p)).join(", "))
    }
    const extra = readOr("apps", "")
    const out = lines.length > 0 ? `${lines.join("\n")}\n` : ""
    process.stdout.write(out + extra)
  }
  process.exit(0)
}

// amd-smi
const json = args.includes("--json")
if (args[0] === "metric" && json) {
  const t = elapsed(true)
  const vu = (value, unit) => ({ value, unit })
  const doc = gpus(t).map((g) => ({
    gpu: g.index,
    usage: { gfx_activity: vu(g.util, "%"), umc_activity: vu(0, "%"), mm_activity: "N/A" },
    power: {
      socket_power: vu(Math.round(g.power), "W"),
      gfx_voltage: "N/A",
      soc_voltage: "N/A",
      mem_voltage: "N/A",
      throttle_status: g.reasons !== 0 ? "THROTTLED" : "UNTHROTTLED",
      power_management: "ENABLED"
    },
    clock: {
      gfx_0: {
        clk: vu(g.clock, "MHz"),
        min_clk: vu(500, "MHz"),
        max_clk: vu(g.maxClock, "MHz"),
        clk_locked: "DISABLED",
        deep_sleep: "DISABLED"
      },
      mem_0: { clk: vu(1300, "MHz"), min_clk: vu(900, "MHz"), max_clk: vu(1300, "MHz"), clk_locked: "N/A", deep_sleep: "DISABLED" }
    },
    temperature: { edge: vu(g.temperature - 8, "C"), hotspot: vu(g.temperature, "C"), mem: vu(g.temperature - 5, "C") }
  }))
  process.stdout.write(`${JSON.stringify(doc, null, 4)}\n`)
  process.exit(0)
}
if (args[0] === "process" && json && args.length === 2) {
  const recorded = readOr("amd", undefined)
  if (recorded !== undefined) {
    process.stdout.write(recorded)
    process.exit(Number(readOr("amd.rc", "0")) || 0)
  }
  const t = elapsed(false)
  const doc = Array.from({ length: scenario.gpus }, (_, i) => ({
    gpu: i,
    process_list:
      foreignDue(t) && scenario.foreignGpu === i
        ? [
            {
              process_info: {
                name: scenario.foreignName,
                pid: scenario.foreignPid,
                memory_usage: {
                  gtt_mem: { value: 2097152, unit: "B" },
                  cpu_mem: { value: 1073741824, unit: "B" },
                  vram_mem: { value: scenario.foreignMib * 1048576, unit: "B" }
                },
                mem_usage: { value: scenario.foreignMib * 1048576, unit: "B" }
              }
            }
          ]
        : [{ process_info: "No running processes detected" }]
  }))
  process.stdout.write(`${JSON.stringify(doc, null, 4)}\n`)
  process.exit(0)
}
unexpected()
