/**
 * What a run's result says beside its metrics, to keep on its record (docs/clients.md): the
 * workload the client sent, completed from its arguments (the dataset it names, and a local
 * dataset file's size and SHA-256), and the notes of reading it (metrics left out or computed,
 * naming field and file).
 */
import { Effect } from "effect"
import { workloadWithArgv } from "../domain/ClientReports.js"
import type { ParsedResult, Workload } from "../domain/Results.js"
import type { AttemptFilesShape } from "../services/AttemptFiles.js"

export interface ResultFacts {
  readonly workload?: Workload | undefined
  readonly resultNotes?: ReadonlyArray<string> | undefined
}

export const resultFacts = (
  files: AttemptFilesShape,
  parsed: Pick<ParsedResult, "workload" | "notes"> | undefined,
  argv: ReadonlyArray<string>
): Effect.Effect<ResultFacts> =>
  Effect.gen(function* () {
    const notes = parsed?.notes ?? []
    const withNotes = notes.length > 0 ? { resultNotes: notes } : {}
    if (parsed?.workload === undefined) return withNotes
    const { datasetPaths, workload } = workloadWithArgv(parsed.workload, argv)
    for (const path of datasetPaths) {
      const facts = yield* files.fileFacts(path)
      if (facts !== undefined) return { workload: { ...workload, dataset_file: facts }, ...withNotes }
    }
    return { workload, ...withNotes }
  })
