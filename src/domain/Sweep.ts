/**
 * A sweep session (docs/design.md#what-a-sweep-keeps): the persisted document
 * `<session>/sweep.json`, the bookkeeping of combinations, points and runs, the per-combination
 * summary and the best, and `summary.csv`. Pure: the program (programs/Sweep/) decides when; these
 * files decide what. This file is the one way in: the schema (Sweep/Schema.ts), the transitions
 * (Sweep/Transitions.ts), the summary (Sweep/Summary.ts), reading and writing (Sweep/File.ts) and
 * the policies beside them; no file under Sweep/ imports it back.
 *
 * Shape (schema_version 1):
 * - `experiment`: what identifies the experiment (Sweep/Identity.ts) — a resume must match it;
 * - `combinations[]`: one per server combination (the Cartesian product of `--param`, first param
 *   slowest), each with its expanded server command line, its engine starts (one lease each),
 *   its status and its `points[]` (grid: every load, ascending, from the start; search: appended
 *   as the search evaluates them);
 * - a point: its load, expanded client argv, status (`pending`, `running`, `ok`, `slo_failed`,
 *   `failed`, `not_run`), its runs (one per repeat, plus a retry of a failed run), the
 *   median/min/max of every metric over its measured repeats and the SLO verdicts on the medians;
 * - `summary`: per combination its largest SLO-passing load and peak, and the best (or the tie).
 *
 * A run is written before its client starts (`ended_at: null`); a run or engine start found open
 * on load was in flight when the process died: `recoverInterrupted` marks it `interrupted`, moves
 * it to its point's `interrupted_runs` and makes the point pending again: the point keeps the runs
 * it finished and goes on from its next repeat; no finished point or run is ever run again.
 * With `--repeats` ≥ 2 a grid's points run in rounds (Sweep/Repeats.ts).
 */
export * from "./Sweep/Adaptive.js"
export * from "./Sweep/Best.js"
export * from "./Sweep/Environment.js"
export * from "./Sweep/File.js"
export * from "./Sweep/Grid.js"
export * from "./Sweep/GridForms.js"
export * from "./Sweep/Grow.js"
export * from "./Sweep/Identity.js"
export * from "./Sweep/Nodes.js"
export * from "./Sweep/NoEngine.js"
export * from "./Sweep/Repeats.js"
export * from "./Sweep/Schema.js"
export * from "./Sweep/Search.js"
export * from "./Sweep/Slo.js"
export * from "./Sweep/Summary.js"
export * from "./Sweep/Time.js"
export * from "./Sweep/Transitions.js"
