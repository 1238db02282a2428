import { assert, describe, it } from "@effect/vitest"
import {
  CAP_SYS_PTRACE,
  flagValue,
  gcsServers,
  parseCapEff,
  parseRayDaemon,
  parseRayDaemons,
  parseStaticResourceList,
  procHiddenReason,
  rayletGcsAddresses,
  raylets
} from "../../src/domain/Daemons.js"
import type { ProcessInfo } from "../../src/domain/Snapshot.js"

const V = "/opt/ray-venv/lib/python3.11/site-packages/ray"
const NODE = "c3e022cab4019df68f1556cbeb4d0462a0962ca9891f8e082eee0162"
const OTHER = "1998d5a92912d4916fc0a1bfd2a2be00bad1a5fd3bb5b82905de5971"

const proc = (
  pid: number,
  comm: string,
  argv: ReadonlyArray<string>,
  extra: Partial<ProcessInfo> = {}
): ProcessInfo => ({
  pid,
  ppid: 1,
  comm,
  argv,
  state: "S",
  ...extra
})

const gcsArgv = (port: number) => [
  `${V}/core/src/ray/gcs/gcs_server`,
  "--log_dir=/tmp/ray/session_x/logs",
  `--gcs_server_port=${port}`,
  "--node-ip-address=192.0.2.2",
  "--session-name=session_2026-11-30_04-58-39_491735_5926",
  `--node-id=${NODE}`
]

/** A raylet argv whose worker/agent command elements carry the look-alike flags. */
const rayletArgv = (opts: { nodeId: string; gcs: string; head: boolean }) => [
  `${V}/core/src/ray/raylet/raylet`,
  "--raylet_socket_name=/tmp/ray/session_x/sockets/raylet",
  `--node_id=${opts.nodeId}`,
  "--static_resource_list=serving_slot,1,node:192.0.2.2,1.0,CPU,2,GPU,2,memory,17563824948",
  // the elements below contain --node-id=, --gcs-address= and " --head" as substrings
  `--python_worker_command=/opt/ray-venv/bin/python3 ${V}/_private/workers/setup_worker.py --node-id=${OTHER} --gcs-address=203.0.113.9:1 --head`,
  `--dashboard_agent_command=/opt/ray-venv/bin/python3 -u ${V}/dashboard/agent.py --node-id=${OTHER} --gcs-address=203.0.113.9:1 --head`,
  `--gcs-address=${opts.gcs}`,
  "--session-name=session_2026-11-30_04-58-39_491735_5926",
  ...(opts.head ? ["--head"] : []),
  "--num_prestart_python_workers=2"
]

describe("parseRayDaemon", () => {
  it("recognises gcs_server by comm and parses its flags", () => {
    const d = parseRayDaemon(proc(10, "gcs_server", gcsArgv(6379)))
    assert.deepStrictEqual(d, {
      kind: "gcs_server",
      pid: 10,
      port: 6379,
      sessionName: "session_2026-11-30_04-58-39_491735_5926",
      nodeIp: "192.0.2.2"
    })
  })

  it("recognises gcs_server by argv[0]'s basename when comm differs", () => {
    const d = parseRayDaemon(proc(11, "gcs_serv", gcsArgv(6380)))
    assert.strictEqual(d?.kind, "gcs_server")
    assert.strictEqual(d?.kind === "gcs_server" ? d.port : 0, 6380)
  })

  it("recognises raylet by argv[0]'s basename when comm differs", () => {
    const d = parseRayDaemon(
      proc(12, "something", rayletArgv({ nodeId: NODE, gcs: "192.0.2.2:6379", head: true }))
    )
    assert.strictEqual(d?.kind, "raylet")
  })

  it("parses a head raylet from whole argv elements only", () => {
    const d = parseRayDaemon(
      proc(20, "raylet", rayletArgv({ nodeId: NODE, gcs: "192.0.2.2:6379", head: true }))
    )
    assert.deepStrictEqual(d, {
      kind: "raylet",
      pid: 20,
      nodeId: NODE,
      gcsAddress: "192.0.2.2:6379",
      isHead: true,
      sessionName: "session_2026-11-30_04-58-39_491735_5926",
      staticResources: { serving_slot: 1, "node:192.0.2.2": 1, CPU: 2, GPU: 2, memory: 17563824948 }
    })
  })

  it("a worker raylet is not a head although its command elements contain ' --head'", () => {
    const d = parseRayDaemon(
      proc(21, "raylet", rayletArgv({ nodeId: OTHER, gcs: "192.0.2.2:6379", head: false }))
    )
    assert.strictEqual(d?.kind, "raylet")
    if (d?.kind !== "raylet") return
    assert.strictEqual(d.isHead, false)
    assert.strictEqual(d.nodeId, OTHER)
    assert.strictEqual(d.gcsAddress, "192.0.2.2:6379")
  })

  it("takes no flag from inside another element", () => {
    // A raylet whose only --node-id / --gcs-address / --head text is inside the worker command.
    const argv = [
      `${V}/core/src/ray/raylet/raylet`,
      `--python_worker_command=python --node_id=${OTHER} --gcs-address=203.0.113.9:1 --head`
    ]
    const d = parseRayDaemon(proc(22, "raylet", argv))
    assert.deepStrictEqual(d, {
      kind: "raylet",
      pid: 22,
      nodeId: undefined,
      gcsAddress: undefined,
      isHead: false,
      sessionName: undefined,
      staticResources: {}
    })
  })

  it("lowercases the node id", () => {
    const d = parseRayDaemon(proc(23, "raylet", ["raylet", `--node_id=${NODE.toUpperCase()}`]))
    assert.strictEqual(d?.kind === "raylet" ? d.nodeId : "", NODE)
  })

  it("ignores Ray's other processes and look-alikes", () => {
    const monitor = proc(30, "python3", [
      "/opt/ray-venv/bin/python3",
      "-u",
      `${V}/autoscaler/_private/monitor.py`,
      "--gcs-address=192.0.2.2:6379"
    ])
    const agent = proc(31, "ray::DashboardA", ["ray::DashboardAgent"])
    const tail = proc(32, "tail", ["tail", "-f", "/tmp/ray/session_latest/logs/raylet.out"])
    const exporter = proc(33, "raylet-exporter", ["/usr/bin/raylet-exporter", "--head"])
    const kernel = proc(34, "kworker/0:0", [])
    for (const p of [monitor, agent, tail, exporter, kernel])
      assert.strictEqual(parseRayDaemon(p), undefined, p.comm)
  })

  it("a zombie raylet or gcs_server is no live daemon", () => {
    assert.strictEqual(parseRayDaemon(proc(40, "raylet", [], { state: "Z" })), undefined)
    assert.strictEqual(parseRayDaemon(proc(41, "gcs_server", [], { state: "Z" })), undefined)
    // with no state known, it counts
    assert.strictEqual(parseRayDaemon(proc(42, "raylet", [], { state: undefined }))?.kind, "raylet")
  })

  it("rejects malformed ports", () => {
    for (const bad of ["", "abc", "0", "70000", "63 79"]) {
      const d = parseRayDaemon(proc(50, "gcs_server", ["gcs_server", `--gcs_server_port=${bad}`]))
      assert.strictEqual(d?.kind === "gcs_server" ? d.port : "x", undefined, bad)
    }
  })
})

describe("flags", () => {
  it("flagValue matches whole elements after argv[0]", () => {
    assert.strictEqual(flagValue(["--a=1", "--b=2"], "--a"), undefined)
    assert.strictEqual(flagValue(["x", "--ab=1", "--a=2"], "--a"), "2")
    assert.strictEqual(flagValue(["x", "--a="], "--a"), "")
  })

  it("parseStaticResourceList reads k,v pairs", () => {
    assert.deepStrictEqual(parseStaticResourceList("CPU,2,GPU,0.5,custom_x,3"), {
      CPU: 2,
      GPU: 0.5,
      custom_x: 3
    })
    assert.deepStrictEqual(parseStaticResourceList(""), {})
    assert.deepStrictEqual(parseStaticResourceList("CPU,2,dangling"), { CPU: 2 })
    assert.deepStrictEqual(parseStaticResourceList("CPU,x,GPU,1"), { GPU: 1 })
    assert.deepStrictEqual(parseStaticResourceList(undefined), {})
    assert.deepStrictEqual(parseStaticResourceList("CPU,2"), { CPU: 2 })
    // an empty value is no 0, an empty key no resource
    assert.deepStrictEqual(parseStaticResourceList("CPU,,GPU,1"), { GPU: 1 })
    assert.deepStrictEqual(parseStaticResourceList(",2,GPU,1"), { GPU: 1 })
  })

  it("a gcs_server's port is a decimal from 1 to 65535, else none", () => {
    const port = (v: string) => {
      const d = parseRayDaemon(proc(2, "gcs_server", ["gcs_server", `--gcs_server_port=${v}`]))
      return d?.kind === "gcs_server" ? d.port : "not a gcs_server"
    }
    assert.strictEqual(port("1"), 1)
    assert.strictEqual(port("65535"), 65535)
    for (const bad of ["0", "65536", "80.5", "1e3", "x80", "80x", "", "-1"])
      assert.isUndefined(port(bad), bad)
  })

  it("a raylet is the head only with --head after argv[0]", () => {
    const head = (argv: ReadonlyArray<string>) => {
      const d = parseRayDaemon(proc(3, "raylet", argv))
      return d?.kind === "raylet" ? d.isHead : undefined
    }
    assert.isTrue(head(["raylet", "--head"]))
    assert.isFalse(head(["raylet"]))
    assert.isFalse(head(["--head", "--x"]))
  })

  it("a zombie or dead process is no daemon, whatever its comm", () => {
    for (const state of ["Z", "X", "x"])
      assert.isUndefined(parseRayDaemon(proc(2, "gcs_server", gcsArgv(6379), { state })), state)
    for (const state of ["S", "R", "D"])
      assert.isDefined(parseRayDaemon(proc(2, "gcs_server", gcsArgv(6379), { state })), state)
  })
})

describe("collections", () => {
  const tree = [
    proc(5, "raylet", rayletArgv({ nodeId: OTHER, gcs: "192.0.2.2:6380", head: true })),
    proc(3, "raylet", rayletArgv({ nodeId: NODE, gcs: "192.0.2.2:6379", head: true })),
    proc(4, "raylet", rayletArgv({ nodeId: "ab", gcs: "192.0.2.2:6379", head: false })),
    proc(2, "gcs_server", gcsArgv(6379)),
    proc(1, "bash", ["bash"])
  ]

  it("parseRayDaemons keeps daemons only, in pid order", () => {
    const ds = parseRayDaemons(tree)
    assert.deepStrictEqual(
      ds.map((d) => d.pid),
      [2, 3, 4, 5]
    )
    assert.deepStrictEqual(
      gcsServers(ds).map((d) => d.port),
      [6379]
    )
    assert.deepStrictEqual(
      raylets(ds).map((d) => d.pid),
      [3, 4, 5]
    )
  })

  it("rayletGcsAddresses gives one address per cluster", () => {
    assert.deepStrictEqual(rayletGcsAddresses(parseRayDaemons(tree)), ["192.0.2.2:6379", "192.0.2.2:6380"])
    assert.deepStrictEqual(rayletGcsAddresses([]), [])
  })
})

describe("procHiddenReason: does /proc show every process?", () => {
  const line = (mountPoint: string, fsType: string, superOptions: string) =>
    `22 27 0:21 / ${mountPoint} rw,relatime shared:12 - ${fsType} ${fsType} ${superOptions}`
  const mountinfo = (...lines: Array<string>) =>
    [line("/", "ext4", "rw"), ...lines, line("/sys", "sysfs", "rw")].join("\n")
  const NO_CAPS = 0n
  const PTRACE = 1n << BigInt(CAP_SYS_PTRACE)
  const hidden = (mi: string, capEff: bigint | undefined = NO_CAPS, groups: Array<number> = [1000]) =>
    procHiddenReason({ mountinfo: mi, root: "/proc", capEff, groups })

  it("a plain proc mount shows everything", () => {
    assert.isUndefined(hidden(mountinfo(line("/proc", "proc", "rw"))))
    assert.isUndefined(hidden(mountinfo(line("/proc", "proc", "rw,hidepid=0"))))
    assert.isUndefined(hidden(mountinfo(line("/proc", "proc", "rw,hidepid=off"))))
    // subset=pid hides /proc's other entries, not processes.
    assert.isUndefined(hidden(mountinfo(line("/proc", "proc", "rw,subset=pid"))))
  })

  it("hidepid=1/2/4 (and their names) hide other users' processes from an unprivileged reader", () => {
    for (const v of ["1", "2", "4", "noaccess", "invisible", "ptraceable"]) {
      const reason = hidden(mountinfo(line("/proc", "proc", `rw,nosuid,hidepid=${v}`)))
      assert.isDefined(reason, v)
      assert.include(reason!, `/proc is mounted with hidepid=${v}`)
      assert.include(reason!, "CAP_SYS_PTRACE")
    }
  })

  it("CAP_SYS_PTRACE, or membership in the mount's gid= group, sees through hidepid", () => {
    const mi = mountinfo(line("/proc", "proc", "rw,hidepid=2,gid=27"))
    assert.isUndefined(hidden(mi, PTRACE))
    assert.isUndefined(hidden(mi, NO_CAPS, [1000, 27]))
    assert.strictEqual(
      hidden(mi, NO_CAPS, [1000]),
      "/proc is mounted with hidepid=2 and this process has neither CAP_SYS_PTRACE nor group 27: other users' Ray daemons would be invisible (run hyperloom as root or with CAP_SYS_PTRACE)"
    )
    assert.strictEqual(
      hidden(mountinfo(line("/proc", "proc", "rw,hidepid=2")), NO_CAPS, [0]),
      "/proc is mounted with hidepid=2 and this process has neither CAP_SYS_PTRACE: other users' Ray daemons would be invisible (run hyperloom as root or with CAP_SYS_PTRACE)"
    )
    // Other capabilities do not help; unknown capabilities are not assumed.
    assert.isDefined(hidden(mi, PTRACE - 1n))
    assert.isDefined(hidden(mi, undefined))
  })

  it("the topmost mount at /proc counts; other mount points and other file systems do not", () => {
    assert.isDefined(
      hidden(mountinfo(line("/proc", "proc", "rw"), line("/proc", "proc", "rw,hidepid=invisible")))
    )
    assert.isUndefined(hidden(mountinfo(line("/proc", "proc", "rw,hidepid=2"), line("/proc", "proc", "rw"))))
    assert.isUndefined(hidden(mountinfo(line("/srv/proc", "proc", "rw,hidepid=2"))))
    assert.isUndefined(hidden(mountinfo(line("/proc", "tmpfs", "rw,hidepid=2"))))
    // A recorded tree elsewhere is no proc mount: it hides nothing it recorded.
    assert.isUndefined(
      procHiddenReason({
        mountinfo: mountinfo(line("/proc", "proc", "rw,hidepid=2")),
        root: "/fixtures/x",
        capEff: 0n,
        groups: []
      })
    )
  })

  it("reads escaped mount points", () => {
    const mi = mountinfo(line("/my\\040proc", "proc", "rw,hidepid=2"))
    assert.isDefined(procHiddenReason({ mountinfo: mi, root: "/my proc", capEff: 0n, groups: [] }))
  })

  it("parses CapEff from a status text", () => {
    assert.strictEqual(parseCapEff("Name:\tx\nCapEff:\t000001fffeffffff\nCapBnd:\t0\n"), 0x1fffeffffffn)
    assert.isUndefined(parseCapEff("Name:\tx\n"))
    assert.strictEqual(parseCapEff("CapEff:00ff"), 0xffn)
    assert.strictEqual(parseCapEff("CapEff:\t00ff  \nX"), 0xffn)
    assert.isUndefined(parseCapEff("CapEff:\t00ff x"))
    assert.isUndefined(parseCapEff("XCapEff:\t00ff"))
  })

  it("skips lines that are no mount record (blank, no separator, too few fields)", () => {
    const mi = `\nnot a mount line\nx - proc proc rw,hidepid=2\n${line("/proc", "proc", "rw,hidepid=2")}\n`
    assert.isDefined(hidden(mi))
    assert.isUndefined(hidden("\nnot a mount line\nx - proc proc rw,hidepid=2\n"))
  })
})
