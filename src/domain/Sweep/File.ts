/**
 * Reading and writing `<session>/sweep.json` (docs/design.md#what-a-sweep-keeps): a document that
 * is not exactly its experiment's grid is refused, never rewritten.
 */
import { Either, ParseResult, Schema } from "effect"
import { oneLine, parseJson } from "../Text.js"
import { SWEEP_SCHEMA_VERSION, SweepDoc } from "./Schema.js"
import { experimentOf, initialSweep } from "./Transitions.js"

export type SweepProblem =
  | { readonly kind: "corrupt"; readonly detail: string }
  | { readonly kind: "future"; readonly version: number }

const decode = Schema.decodeUnknownEither(SweepDoc)
const encode = Schema.encodeSync(SweepDoc)

export const parseSweep = (text: string): Either.Either<SweepDoc, SweepProblem> => {
  const parsed = parseJson(text)
  if (Either.isLeft(parsed)) return Either.left(parsed.left)
  const json = parsed.right
  const v = (json as { schema_version?: unknown } | null)?.schema_version
  if (typeof v === "number" && Number.isInteger(v) && v > SWEEP_SCHEMA_VERSION)
    return Either.left({ kind: "future", version: v })
  return Either.flatMap(
    Either.mapLeft(decode(json), (e) => ({
      kind: "corrupt" as const,
      detail: oneLine(ParseResult.TreeFormatter.formatErrorSync(e))
    })),
    (doc) => {
      const problem = gridProblem(doc)
      return problem === undefined
        ? Either.right(doc)
        : Either.left({ kind: "corrupt" as const, detail: problem })
    }
  )
}

const sameParams = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>) => {
  const ka = Object.keys(a)
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k])
}

/**
 * Whether the document's combination records are exactly its experiment's grid (issue 27 item 4):
 * one record per combination `initialSweep` lays out, in order, index i at position i with that
 * combination's params, and (for load points) each with the grid's loads. A file edited by hand
 * (a record removed: a best over half the grid; two swapped with a point reset: one point re-run
 * forever) is refused, naming the first problem, and never rewritten.
 */
export const gridProblem = (doc: SweepDoc): string | undefined => {
  const want = initialSweep(experimentOf(doc.experiment), doc.created_at).combinations
  const got = doc.combinations
  if (got.length !== want.length)
    return `it holds ${got.length} combination record(s) where its experiment's grid has ${want.length}; the file was edited or damaged`
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!
    const w = want[i]!
    if (g.index !== i)
      return `combination record ${i} has index ${g.index} (records must be 0…${want.length - 1} in order); the file was edited or damaged`
    if (!sameParams(g.params, w.params))
      return `combination ${i} has params ${JSON.stringify(g.params)} where the grid has ${JSON.stringify(w.params)}; the file was edited or damaged`
    if (doc.experiment.load.kind === "points") {
      const loads = g.points.map((p) => p.load)
      const wanted = w.points.map((p) => p.load)
      if (loads.length !== wanted.length || loads.some((l, j) => l !== wanted[j]))
        return `combination ${i} has load points ${loads.join(", ") || "(none)"} where the grid has ${wanted.join(", ")}; the file was edited or damaged`
    }
  }
  return undefined
}

export const renderSweep = (doc: SweepDoc): string => `${JSON.stringify(encode(doc), null, 2)}\n`
