/**
 * A failure's evidence, read one way wherever it is read (a baseline's serving attempt, a sweep's
 * engine that was never ready, a sweep's client run; docs/design.md#classified-from-what-happened):
 * each log scanned whole, line by line (AttemptFiles.scanLog: memory flat), into one output digest
 * (the failure's signature, domain/Signature.ts) and the telling lines (domain/Attempt.ts
 * `keepEvidence`); of each log its tail is kept (MAX_ERROR_CHARS × 4), "" when it is missing.
 */
import { Effect } from "effect"
import { keepEvidence } from "../domain/Attempt.js"
import { MAX_ERROR_CHARS } from "../domain/Failure.js"
import { OutputDigest } from "../domain/Signature.js"
import type { AttemptFilesShape } from "../services/AttemptFiles.js"

/** A log to read, and the channel its lines count under in the digest ("server", "client"). */
export interface EvidenceLog {
  readonly file: string
  readonly channel: string
}

export interface Evidence {
  /** Each log's tail, in the order given. */
  readonly tails: ReadonlyArray<string>
  /** The digest of every line of every log. */
  readonly signature: string
  /** The telling lines, the first MAX_EVIDENCE_LINES of them. */
  readonly evidence: ReadonlyArray<string>
}

export const readEvidence = (files: AttemptFilesShape, logs: ReadonlyArray<EvidenceLog>) =>
  Effect.gen(function* () {
    const digest = new OutputDigest()
    const evidence: Array<string> = []
    const tails: Array<string> = []
    for (const log of logs) {
      const tail = yield* files.scanLog(
        log.file,
        (line) => {
          digest.add(log.channel, line)
          keepEvidence(evidence, line)
        },
        MAX_ERROR_CHARS * 4
      )
      tails.push(tail ?? "")
    }
    return { tails, signature: digest.signature(), evidence } satisfies Evidence
  })
