import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Console, Duration, Effect, Option } from "effect"
import { SessionNotFound } from "../../domain/Errors.js"
import { redactExperiment } from "../../domain/Redact.js"
import { DEFAULT_READY_PATH, readiness } from "../../domain/Serving.js"
import { decideClass, leftAloneOf, renderDecision, servingNodes } from "../../domain/Sweep/ClassChoice.js"
import { sessionLeft } from "../../domain/Sweep/Left.js"
import { type Estimate, renderPlan, sweepPlan } from "../../domain/Sweep/Plan.js"
import {
  autoParallel,
  type Combination,
  checkGridForms,
  checkPlaceholders,
  combinations,
  type Experiment,
  type Link,
  type LoadSpec,
  nodeName,
  type Param,
  paramsOfCombos,
  parseCombo,
  parseLinks,
  parseParallel,
  parseSearch,
  parseSlo,
  parseValues,
  renderSweep,
  type Slo,
  STRATEGIES,
  type Strategy,
  type SweepDoc
} from "../../domain/Sweep.js"
import { dryRunEstimate, recordSweepEnd } from "../../programs/Sweep/HostSweeps.js"
import { runSweep } from "../../programs/Sweep.js"
import { ClusterInspector } from "../../services/ClusterInspector.js"
import { Settings } from "../../services/Settings.js"
import { SweepStore } from "../../services/SweepStore.js"
import { VERSION } from "../../version.js"
import { EXIT, ExitWith, exitCodeForSweep, UsageError } from "../Exit.js"
import { renderSweepText } from "../RenderSweep.js"
import { withJsonErrors } from "../Run.js"
import {
  checkCmd,
  commandArgs,
  gpuCleanTimeout,
  gpus,
  json,
  leaseRequestOf,
  maxFailed,
  nodes,
  positiveSeconds,
  strictCommand,
  warmup
} from "../Shared.js"
import { statusRedraw, unpinStatus } from "../StatusLine.js"
import { waitOption } from "./queue.js"
import { sessionOption } from "./state.js"

const session = sessionOption(
  "The sweep's session directory: it holds sweep.json (the experiment and every point), summary.csv, environment.json, the lock, and per combination its engine's server.log and per run its client.log and result file. A new directory starts a sweep; the same command on it resumes one."
)

const server = Options.text("server").pipe(
  Options.withPseudoName("'SERVER CMD'"),
  Options.withDescription(
    "The engine's command line, ONE string run with `sh -c` in a process group of its own, with {name} placeholders for the --param values, e.g. 'vllm serve MODEL --port $HYPERLOOM_PORT --max-num-seqs {max-num-seqs}'. One lease and one engine start per combination; it serves every load point of that combination."
  )
)

const param = Options.text("param").pipe(
  Options.withPseudoName("NAME=VALUES"),
  Options.withDescription(
    "NAME=V1,V2,… : a server parameter and its values (repeat --param for more; the grid is their Cartesian product). {NAME} is replaced in the server string and the client's arguments; values are used as written."
  ),
  Options.repeated
)

const combo = Options.text("combo").pipe(
  Options.withPseudoName("'NAME=V,NAME=V'"),
  Options.withDescription(
    "Instead of --param: one server combination, its params and values (repeat --combo for more; exactly these run, in this order, not their product), e.g. --combo 'max-num-seqs=64,tp=1' --combo 'max-num-seqs=256,tp=2'."
  ),
  Options.repeated
)

const linkVars = Options.text("link-vars").pipe(
  Options.withPseudoName("PARAM=LOAD"),
  Options.withDescription(
    "Linked values, as vLLM's bench sweep --link-vars: each combination runs only the --load point equal to its PARAM (e.g. max-num-seqs=c: every engine at the concurrency of its own batch limit). Comma-separated or repeated; not with --search."
  ),
  Options.repeated
)

const resetPrefixCache = Options.boolean("reset-prefix-cache").pipe(
  Options.withDescription(
    "Before each client run (before --between), reset the engine's prefix cache: POST $HYPERLOOM_BASE_URL/reset_prefix_cache (vLLM; its server needs VLLM_SERVER_DEV_MODE=1 in its environment), else /flush_cache (SGLang), with curl on the leased node; a reset that fails fails the run. Off by default; vLLM's bench sweep resets by default. Without it (or a --between that resets), repeats and later load points can hit a cache the earlier runs warmed, and look better than a cold engine would."
  )
)

/** The --between command line of --reset-prefix-cache: vLLM's endpoint, else SGLang's. */
export const RESET_PREFIX_CACHE =
  'curl -sf -X POST "$HYPERLOOM_BASE_URL/reset_prefix_cache" >/dev/null || curl -sf -X POST "$HYPERLOOM_BASE_URL/flush_cache" >/dev/null'

const load = Options.text("load").pipe(
  Options.withPseudoName("NAME=VALUES"),
  Options.withDescription(
    "NAME=V1,V2,… : the client load points (e.g. concurrency), run in ascending order against each combination's engine; {NAME} in the client's arguments. `inf` is a valid rate."
  ),
  Options.optional
)

const oneRun = Options.boolean("one-run").pipe(
  Options.withDescription(
    "The client takes every --load point of a combination in ONE run: {NAME} becomes the comma list (GuideLLM's --rate 1,2,4, AIPerf's --concurrency 1,2,4), and each benchmark of its report is the point at the load the report states (a point with no benchmark at its load fails, saying so). Needs a client whose report holds several benchmarks (docs/clients.md#in-a-sweep); not with --search or --link-vars."
  )
)

const search = Options.text("search").pipe(
  Options.withPseudoName("NAME[:MAX]"),
  Options.withDescription(
    "NAME[:MAX] instead of --load (needs --slo): per combination, the largest integer load meeting every SLO: 1, 2, 4, … until an SLO fails or MAX (default 1024), then bisection; every evaluated point is recorded."
  ),
  Options.optional
)

const slo = Options.text("slo").pipe(
  Options.withPseudoName("METRIC<=X"),
  Options.withDescription(
    "METRIC<=X or METRIC>=X, on the median over the repeats (any metric of the result file: p99_ttft_ms, p99_tpot_ms, output_throughput, …); repeat for more: all must hold."
  ),
  Options.repeated
)

const repeats = Options.integer("repeats").pipe(
  Options.withPseudoName("N"),
  Options.withDescription(
    "Client runs per point (default 1), in rounds: every load point once, then again (with --search, a point's runs in a row). With 2 or more: per point the mean, standard deviation, CV (over 5 % is flagged noisy) and 95 % interval, and a best that does not beat another combination's best by Welch's t-test at 95 % is reported as a tie. With 1 there is no noise estimate and the best says so."
  ),
  Options.optional
)

const between = Options.text("between").pipe(
  Options.withPseudoName("'CMD'"),
  Options.withDescription(
    "A shell command line run (sh -c, on the leased node, HYPERLOOM_* set) before each client run, e.g. 'curl -sf -X POST $HYPERLOOM_BASE_URL/reset_prefix_cache' (--reset-prefix-cache does that one). Nothing runs between client runs by default, so repeats and later points may meet a cache the earlier runs warmed."
  ),
  Options.optional
)

const pointTimeout = positiveSeconds(
  "point-timeout",
  "Bound each client run, from its start; past it the run is stopped and fails as a timeout (retried once)."
)
const readyPath = Options.text("ready-path").pipe(
  Options.withPseudoName("P"),
  Options.withDescription(`The path polled for the engine's readiness (default ${DEFAULT_READY_PATH}).`),
  Options.optional
)
/**
 * A sweep's engine gets less than a baseline's (1800 s): a sweep has many starts, and a hang is not
 * retried (docs/design.md#time-to-the-answer).
 */
export const SWEEP_READY_TIMEOUT_SEC = 600

const readyTimeout = positiveSeconds(
  "ready-timeout",
  `How long each engine may take to answer its readiness check (default ${SWEEP_READY_TIMEOUT_SEC} s; a readiness timeout is not retried).`
)

const strategy = Options.choice("strategy", STRATEGIES).pipe(
  Options.withDescription(
    "grid (default): every combination. adaptive: numeric --param values as ordered axes, a coordinate search from the middle of each that moves while the best SLO-passing throughput improves beyond the noise; a kv_cache_oom skips what lies further out on that axis; what it does not run is `skipped` with the reason (it assumes each numeric axis unimodal). The same command with --strategy grid on that session runs the skipped combinations."
  ),
  Options.withDefault("grid" as const)
)

const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription(
    `Print the plan (combinations, points, runs, the first combination's command lines) and an estimate of its time; run nothing (exit ${EXIT.ok}).`
  )
)

const estimateStart = positiveSeconds(
  "estimate-start",
  "--dry-run: seconds per engine start (launch to ready) for the estimate."
)
const estimateRun = positiveSeconds("estimate-run", "--dry-run: seconds per client run for the estimate.")
const deadline = positiveSeconds(
  "deadline",
  `Bound the whole run, in seconds; past it the engine is stopped and the sweep stops (exit ${EXIT.sessionTimeExhausted}); the same command resumes it.`
)

const parallel = Options.text("parallel").pipe(
  Options.withPseudoName("N|auto"),
  Options.withDescription(
    "Run up to N combinations at once (default 1), each under its own lease (or group with --nodes) on a node no other running combination holds: Ray's serving_slot decides where, one engine per node. auto: as many as the cluster can hold at once (alive nodes with serving_slot and --gpus GPUs, of the sweep's hardware class). Combinations are handed out in the sweep's order (with --strategy adaptive: what the search needs next, then the neighbours it is about to compare). The hardware class (GPU model and count per node; with no GPU, the CPU model) is decided before the first lease (see --hardware-class): nodes of another class get no engine start, and are named once."
  ),
  Options.optional
)

const hardwareClass = Options.text("hardware-class").pipe(
  Options.withPseudoName("CLASS"),
  Options.withDescription(
    "The hardware class to sweep on (GPU model and count per node: L4, NVIDIA L4, 2xL4; cpu for nodes without GPU). Without it the class is decided before the first lease from what the nodes that could serve tell (Ray's GPU count and accelerator type, the vendor tool's model where an earlier engine start recorded it): the class with the most such nodes; the other classes' nodes get no engine start, and are named once. A resumed sweep keeps its class."
  ),
  Options.optional
)

/**
 * The sweep's hardware class as the cluster tells it now (domain/Sweep/ClassChoice.ts), for
 * `--dry-run` and `--parallel auto`: undefined when the cluster cannot be read (bounded).
 */
const clusterClass = (gpus: number, held: SweepDoc | undefined, chosen: string | undefined) =>
  Effect.gen(function* () {
    const inspector = yield* ClusterInspector
    const known = (held?.combinations ?? []).flatMap((c) =>
      c.engine_starts.flatMap((s) => (s.node === undefined ? [] : [s.node]))
    )
    const read = yield* inspector.resolve.pipe(
      Effect.flatMap((r) => inspector.snapshot(r.gcsAddress)),
      Effect.map((snap) => ({
        snap,
        decision: decideClass(servingNodes(snap, gpus, [...known, ...(held?.left_alone ?? [])]), {
          kept: held?.hardware_class,
          chosen
        })
      })),
      Effect.timeout(Duration.seconds(5)),
      Effect.option
    )
    return Option.getOrUndefined(read)
  })

/** `--parallel`: the number, or for `auto` what the cluster can hold at once (read from Ray). */
const parallelOf = (
  text: Option.Option<string>,
  session: string,
  gpus: number,
  nodeCount: number,
  chosen: string | undefined
) =>
  Effect.gen(function* () {
    if (Option.isNone(text)) return 1
    const p = parseParallel(text.value)
    if (!p.ok) return yield* usage(p.error)
    if (p.value !== "auto") return p.value
    const doc = yield* Effect.flatMap(SweepStore, (store) => store.load(session)).pipe(
      Effect.map(Option.getOrUndefined),
      Effect.orElseSucceed(() => undefined)
    )
    // of the class the sweep will run on (decided now as the run will decide it), its other nodes left alone
    const read = yield* clusterClass(gpus, doc, chosen)
    const d = read?.decision
    const n =
      read === undefined
        ? Option.none()
        : Option.some(
            autoParallel(read.snap, {
              gpus,
              nodes: nodeCount,
              cls: d?._tag === "decided" ? d.cls : doc?.hardware_class,
              leftAlone: [...(doc?.left_alone ?? []), ...(d === undefined ? [] : leftAloneOf(d))].flatMap(
                (x) => (x.node_id === null ? [] : [x.node_id])
              )
            })
          )
    if (Option.isNone(n)) {
      yield* Effect.logWarning(
        "--parallel auto: the cluster could not be read; running one combination at a time"
      )
      return 1
    }
    yield* Effect.logInfo(`--parallel auto: the cluster can hold ${n.value} combination(s) at once`)
    return n.value
  })

const cmd = commandArgs(
  "The load client and its arguments, after `--` (no shell), with {name} placeholders; HYPERLOOM_PORT, HYPERLOOM_BASE_URL, HYPERLOOM_RESULT_FILE and HYPERLOOM_SWEEP_RUN_DIR (the result file's folder: AIPerf's --output-artifact-dir) are set. vLLM, SGLang, GuideLLM and AIPerf reports are read (docs/clients.md)."
)

/** The options before `--`, named for `strictCommand` (test/cli/HelpTables.test.ts checks them against the Command). */
export const OPTIONS = [
  "--session",
  "--gpus",
  "--nodes",
  "--server",
  "--param",
  "--combo",
  "--link-vars",
  "--reset-prefix-cache",
  "--load",
  "--one-run",
  "--search",
  "--slo",
  "--repeats",
  "--between",
  "--point-timeout",
  "--ready-path",
  "--ready-timeout",
  "--deadline",
  "--wait",
  "--gpu-clean-timeout",
  "--parallel",
  "--strategy",
  "--hardware-class",
  "--dry-run",
  "--estimate-start",
  "--estimate-run",
  "--check",
  "--warmup",
  "--max-failed",
  "--json"
]

const usage = (detail: string) => new UsageError({ detail })

/** The experiment from the options, or a usage error naming what is wrong (nothing runs). */
export const experimentOf = (o: {
  readonly server: string
  readonly param: ReadonlyArray<string>
  readonly combo: ReadonlyArray<string>
  readonly linkVars: ReadonlyArray<string>
  readonly load: Option.Option<string>
  readonly search: Option.Option<string>
  readonly slo: ReadonlyArray<string>
  readonly repeats: Option.Option<number>
  readonly gpus: number
  readonly nodes: number
  readonly client: ReadonlyArray<string>
  readonly oneRun?: boolean | undefined
}) =>
  Effect.gen(function* () {
    if (o.server.trim() === "") return yield* usage("--server must be a command line, got an empty string")
    const params: Array<Param> = []
    for (const text of o.param) {
      const p = parseValues("--param", text)
      if (!p.ok) return yield* usage(p.error)
      params.push(p.value)
    }
    let combos: ReadonlyArray<Combination> | undefined
    if (o.combo.length > 0) {
      if (o.param.length > 0)
        return yield* usage(
          "give --param NAME=V1,V2 (their product) or --combo 'NAME=V,NAME=V' (a list), not both"
        )
      const list: Array<Combination> = []
      for (const text of o.combo) {
        const c = parseCombo(text)
        if (!c.ok) return yield* usage(c.error)
        list.push(c.value)
      }
      const derived = paramsOfCombos(list)
      if (!derived.ok) return yield* usage(derived.error)
      params.push(...derived.value)
      combos = list
    }
    let links: ReadonlyArray<Link> | undefined
    if (o.linkVars.length > 0) {
      const l = parseLinks(o.linkVars)
      if (!l.ok) return yield* usage(l.error)
      links = l.value
    }
    if (Option.isSome(o.load) === Option.isSome(o.search))
      return yield* usage("give exactly one of --load NAME=V1,… and --search NAME[:MAX]")
    let loadSpec: LoadSpec
    if (Option.isSome(o.load)) {
      const l = parseValues("--load", o.load.value)
      if (!l.ok) return yield* usage(l.error)
      loadSpec = { kind: "points", ...l.value }
    } else {
      const s = parseSearch(Option.getOrThrow(o.search))
      if (!s.ok) return yield* usage(s.error)
      loadSpec = { kind: "search", ...s.value }
    }
    const slos: Array<Slo> = []
    for (const text of o.slo) {
      const s = parseSlo(text)
      if (!s.ok) return yield* usage(s.error)
      slos.push(s.slo)
    }
    if (o.oneRun === true && (loadSpec.kind === "search" || links !== undefined))
      return yield* usage(
        "--one-run takes the --load points in one client run: not with --search (each step depends on the last) or --link-vars"
      )
    if (loadSpec.kind === "search" && slos.length === 0)
      return yield* usage("--search needs --slo: the search looks for the largest load that meets every SLO")
    const r = Option.getOrElse(o.repeats, () => 1)
    if (!Number.isInteger(r) || r < 1) return yield* usage(`--repeats must be a whole number >= 1, got ${r}`)
    const experiment: Experiment = {
      server: o.server,
      client: o.client,
      params,
      load: loadSpec,
      slos,
      repeats: r,
      gpus: o.gpus,
      nodes: o.nodes,
      ...(combos !== undefined ? { combos } : {}),
      ...(links !== undefined ? { links } : {}),
      ...(o.oneRun === true ? { oneRun: true } : {})
    }
    const problems = [
      ...checkPlaceholders(experiment),
      ...checkGridForms({
        params,
        load: loadSpec,
        links,
        combos: combos ?? combinations(params),
        ...(loadSpec.kind === "points" ? { loads: loadSpec.values } : {})
      })
    ]
    if (problems.length > 0) return yield* usage(problems.join("; "))
    return experiment
  })

/** The command run before each client run: the cache reset, then the user's --between. */
export const betweenOf = (reset: boolean, between: string | undefined): string | undefined =>
  !reset ? between : between === undefined ? RESET_PREFIX_CACHE : `${RESET_PREFIX_CACHE} && ${between}`

/**
 * The plan `--dry-run` prints: the sweep's combinations, points and runs, an estimate of its time,
 * and on a session that holds a sweep what the same command would still run there. Runs nothing.
 */
export const dryRunPlan = (
  experiment: Experiment,
  strategy: Strategy,
  session: string,
  given: Estimate | null
) =>
  Effect.gen(function* () {
    const held = yield* Effect.flatMap(SweepStore, (store) => store.load(session)).pipe(
      Effect.orElseSucceed(() => Option.none())
    )
    const bare = sweepPlan(experiment, strategy, null)
    // on a session that holds a sweep: what the same command would still run there
    const left = Option.map(held, (d) =>
      sessionLeft(d, redactExperiment(experiment), strategy, bare.points_per_combination)
    )
    const chosen = yield* dryRunEstimate(given, held, experiment.server)
    return sweepPlan(experiment, strategy, chosen.estimate, Option.getOrUndefined(left), chosen.unlike)
  })

const description = `Find the best serving configuration under an SLO. Each combination of the --param values gets one lease and one engine start (--server, its readiness as baseline run --server's); the client (CMD after --) then runs at each --load point in ascending order, or as --search picks them, --repeats times each, and each --slo is judged on the median over the repeats. An engine failing before ready with kv_cache_oom or fast_exit_arg_error makes its combination infeasible; any other failure is retried once; an engine dying during a point ends its combination; completed = 0 is never a measurement. The same command resumes an interrupted sweep (SIGKILL included) without running a finished point again; another experiment on the same session is refused. Exit: ${EXIT.ok} with a best, ${EXIT.sweepNoEngineReady} sweep_no_engine_ready (no engine ever became ready), ${EXIT.sweepNoFeasiblePoint} sweep_no_feasible_point, ${EXIT.infeasible} infeasible cluster, ${EXIT.sessionTimeExhausted} deadline, ${EXIT.waitExpired} lease_wait_expired, ${EXIT.cancelled} cancelled, ${EXIT.usage} usage.`

export const sweepRun = Command.make(
  "run",
  {
    session,
    gpus,
    nodes,
    server,
    param,
    combo,
    linkVars,
    resetPrefixCache,
    load,
    oneRun,
    search,
    slo,
    repeats,
    between,
    pointTimeout,
    readyPath,
    readyTimeout,
    deadline,
    wait: waitOption,
    gpuCleanTimeout,
    parallel,
    strategy,
    hardwareClass,
    dryRun,
    estimateStart,
    estimateRun,
    check: checkCmd,
    warmup,
    maxFailed,
    json,
    cmd
  },
  (o) =>
    Effect.gen(function* () {
      const client = yield* strictCommand(o.cmd, OPTIONS)
      const settings = yield* Settings
      const experiment = yield* experimentOf({
        ...o,
        nodes: Option.getOrElse(o.nodes, () => settings.nodes),
        client
      })
      const ready = readiness(
        Option.getOrUndefined(o.readyPath),
        Option.getOrElse(o.readyTimeout, () => SWEEP_READY_TIMEOUT_SEC)
      )
      if (o.dryRun) {
        const given =
          Option.isSome(o.estimateStart) && Option.isSome(o.estimateRun)
            ? { start_sec: o.estimateStart.value, run_sec: o.estimateRun.value, source: "options" as const }
            : null
        const plan = yield* dryRunPlan(experiment, o.strategy, o.session, given)
        const held = yield* Effect.flatMap(SweepStore, (store) => store.load(o.session)).pipe(
          Effect.orElseSucceed(() => Option.none())
        )
        // the class it would run on (docs/design.md#sweeps-at-cluster-scale), as the cluster tells it now
        const read = yield* clusterClass(
          o.gpus,
          Option.getOrUndefined(held),
          Option.getOrUndefined(o.hardwareClass)
        )
        const cls =
          read === undefined
            ? {
                statement:
                  "hardware class: not read (no cluster could be read now); decided before the first lease"
              }
            : {
                statement: renderDecision(read.decision),
                ...(read.decision._tag === "decided"
                  ? {
                      class: read.decision.cls,
                      nodes: read.decision.nodes.map(nodeName),
                      left_alone: leftAloneOf(read.decision).map(nodeName)
                    }
                  : {})
              }
        yield* o.json
          ? Console.log(JSON.stringify({ dry_run: true, ...plan, hardware_class: cls }, null, 2))
          : Console.log(`${renderPlan(plan)}\n${cls.statement}`)
        return
      }
      const atOnce = yield* parallelOf(
        o.parallel,
        o.session,
        o.gpus,
        experiment.nodes,
        Option.getOrUndefined(o.hardwareClass)
      )
      const print = (doc: SweepDoc) =>
        o.json ? Console.log(renderSweep(doc).trimEnd()) : Console.log(renderSweepText(o.session, doc))
      const program = runSweep({
        sessionDir: o.session,
        experiment,
        request: leaseRequestOf(o),
        between: betweenOf(o.resetPrefixCache, Option.getOrUndefined(o.between)),
        pointTimeoutSec: Option.getOrUndefined(o.pointTimeout),
        readiness: ready,
        deadlineSec: Option.getOrUndefined(o.deadline),
        waitSec: Option.getOrUndefined(o.wait),
        parallel: atOnce,
        redrawStatus: statusRedraw(),
        env: settings.env,
        cwd: settings.cwd,
        version: VERSION,
        strategy: o.strategy,
        hardwareClass: Option.getOrUndefined(o.hardwareClass),
        check: Option.getOrUndefined(o.check),
        warmup: Option.getOrUndefined(o.warmup),
        maxFailed: Option.getOrUndefined(o.maxFailed)
      }).pipe(
        Effect.onInterrupt(() =>
          Effect.flatMap(SweepStore, (store) => store.load(o.session)).pipe(
            Effect.flatMap(Option.match({ onNone: () => Effect.void, onSome: print })),
            Effect.ignore
          )
        )
      )
      const began = yield* Clock.currentTimeMillis
      const report = yield* program.pipe(
        Effect.ensuring(unpinStatus),
        // the user's recent sweeps on this host, for a later --dry-run's estimate
        Effect.ensuring(recordSweepEnd(o.session, began))
      )
      yield* print(report.doc)
      const code = exitCodeForSweep(report.doc)
      if (code !== EXIT.ok) return yield* Effect.fail(new ExitWith({ code }))
    }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(Command.withDescription(description))

export const sweepShow = Command.make("show", { session, json }, (o) =>
  Effect.gen(function* () {
    const loaded = yield* Effect.flatMap(SweepStore, (store) => store.load(o.session))
    if (Option.isNone(loaded)) return yield* new SessionNotFound({ sessionDir: o.session, kind: "sweep" })
    yield* o.json
      ? Console.log(renderSweep(loaded.value).trimEnd())
      : Console.log(renderSweepText(o.session, loaded.value))
  }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(
  Command.withDescription(
    "Show a sweep session's points and its best. The points table (median, and min–max with repeats), per combination its largest SLO-passing load and peak throughput, and the best (or the tie) with its complete server and client command lines. --json prints sweep.json itself (a versioned, stable document). Never modifies the session."
  )
)
