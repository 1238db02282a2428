/**
 * Fake `nvidia-smi` and `amd-smi` executables for the clean-GPU tests (docs/design.md#clean-gpus):
 * put `dir` first on PATH and they print the recorded outputs in test/fixtures/gpu, as the real
 * tools print them for the queries python/hyperloom/gpus.py makes. What they list can change while
 * a test runs: `nvidia-smi --query-compute-apps` prints the file `apps` (nothing while it does not
 * exist: an idle host), `amd-smi process --json` prints the file `amd` and exits with the code in
 * `amd.rc`.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const fixtureDir = path.resolve(import.meta.dirname, "../fixtures/gpu")
export const fixture = (name: string) => fs.readFileSync(path.join(fixtureDir, name), "utf8")

export interface FakeGpuTools {
  readonly dir: string
  /** PATH with the fakes first. */
  readonly path: string
  /** What nvidia-smi lists as compute apps from now on (undefined: nothing). */
  readonly setApps: (csv: string | undefined) => void
  readonly setAmd: (json: string, rc?: number) => void
  readonly remove: () => void
}

/** The handle on a dir of fakes: `apps` is what nvidia-smi lists, `amd` (and `amd.rc`) what amd-smi does. */
const toolsIn = (dir: string): FakeGpuTools => {
  const apps = path.join(dir, "apps")
  const amd = path.join(dir, "amd")
  return {
    dir,
    path: `${dir}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    setApps: (csv) => (csv === undefined ? fs.rmSync(apps, { force: true }) : fs.writeFileSync(apps, csv)),
    setAmd: (json, rc = 0) => {
      fs.writeFileSync(amd, json)
      fs.writeFileSync(`${amd}.rc`, String(rc))
    },
    remove: () => fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** Both fakes (`tools`: which ones) in a fresh temp dir; `nvidia-smi --query-gpu` prints the fixture. */
export const fakeGpuTools = (
  tools: ReadonlyArray<"nvidia-smi" | "amd-smi"> = ["nvidia-smi"],
  base = os.tmpdir()
): FakeGpuTools => {
  const dir = fs.mkdtempSync(path.join(base, "hyperloom-fake-gpu-"))
  const apps = path.join(dir, "apps")
  const amd = path.join(dir, "amd")
  if (tools.includes("nvidia-smi")) {
    fs.writeFileSync(
      path.join(dir, "nvidia-smi"),
      `#!/bin/sh
case "$*" in
  *--query-gpu=index,uuid*) cat '${path.join(fixtureDir, "nvidia-smi-gpus.csv")}' ;;
  *--query-compute-apps=pid,process_name,gpu_uuid,used_memory*) [ -e '${apps}' ] && cat '${apps}' ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
exit 0
`,
      { mode: 0o755 }
    )
  }
  if (tools.includes("amd-smi")) {
    fs.writeFileSync(
      path.join(dir, "amd-smi"),
      `#!/bin/sh
[ "$*" = "process --json" ] || { echo "fake amd-smi: unexpected arguments: $*" >&2; exit 2; }
cat '${amd}'
exit $(cat '${amd}.rc' 2>/dev/null || echo 0)
`,
      { mode: 0o755 }
    )
  }
  return toolsIn(dir)
}

/** The GPU UUIDs of test/fixtures/gpu/nvidia-smi-gpus.csv, by index. */
export const FIXTURE_UUID = [
  "GPU-5e5c2c7e-8a49-7d3b-4d7e-0e6f4c1b9a21",
  "GPU-a1f3b0c2-1d2e-4f5a-8b9c-3d4e5f6a7b8c"
] as const

/** One compute-apps line in nvidia-smi's format. */
export const appLine = (pid: number, gpu: 0 | 1, name: string, mib: number) =>
  `${pid}, ${name}, ${FIXTURE_UUID[gpu]}, ${mib} MiB\n`

/** A scenario for examples/fake-gpu-tool.mjs (its header): seconds count from the first clocks query. */
export interface GpuScenario {
  readonly gpus?: number
  readonly clock?: number
  readonly throttleAfter?: number
  readonly throttledClock?: number
  readonly throttleReason?: string
  readonly foreignAfter?: number
  readonly foreignPid?: number
  readonly foreignName?: string
  readonly foreignGpu?: number
}

/**
 * The stand-in vendor tools of examples/fake-gpu-tool.mjs (clocks, throttle reasons, temperature,
 * power and compute processes that change mid-run) installed in a fresh temp dir; `setApps` and
 * `setAmd` work as with `fakeGpuTools`.
 */
export const fakeGpuTool = (scenario: GpuScenario = {}, base = os.tmpdir()): FakeGpuTools => {
  const dir = fs.mkdtempSync(path.join(base, "hyperloom-fake-gpu-tool-"))
  const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
  const flags = Object.entries(scenario).flatMap(([k, v]) =>
    v === undefined ? [] : [`--${kebab(k)}`, String(v)]
  )
  execFileSync(
    process.execPath,
    [path.resolve(import.meta.dirname, "../../examples/fake-gpu-tool.mjs"), "install", dir, ...flags],
    {
      stdio: ["ignore", "ignore", "inherit"]
    }
  )
  return toolsIn(dir)
}
