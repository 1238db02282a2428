/**
 * The note a sweep keeps for a combination whose engine never became ready
 * (docs/design.md#time-to-the-answer "Say which failure it was"): the class and what happened, the
 * engine's own telling line quoted (the argparse error, the KV-cache ValueError, an exception's
 * message) and the path of its `server.log`. Pure.
 */
import { isTellingLine } from "../Failure.js"

/** argparse's `prog: error: …`, or where an exception's own message starts (`ValueError: …`). */
const ERRORISH = /(?:^|\s|:)error: |\b[A-Z][A-Za-z0-9_]*(?:Error|Exception): /

/**
 * The engine's telling line in its output: a line that decides a class (KV-cache, argument
 * error) first, else the last argparse/exception line; undefined when there is none.
 */
export const tellingLine = (output: string): string | undefined => {
  const lines = output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
  const decisive = lines.filter(isTellingLine)
  const pick = decisive.at(-1) ?? lines.filter((l) => ERRORISH.test(l)).at(-1)
  return pick === undefined ? undefined : pick.slice(0, 400)
}

/**
 * `<class>: <what happened>; the engine said: "<line>"; its log: <dir>/server.log`, then the
 * error text as it was (its first line is what `sweep show` prints).
 */
export const engineNote = (
  r: { readonly errorClass: string | null; readonly error: string | null; readonly launchLog: string },
  serverLog: string
): string => {
  const error = r.error ?? ""
  const what = error.split("\n").find((l) => l.trim() !== "") ?? "the engine did not become ready"
  const said = tellingLine(`${r.launchLog}\n${error}`)
  const head = `${r.errorClass ?? "failed"}: ${what}${said === undefined ? "" : `; the engine said: "${said}"`}; its log: ${serverLog}`
  return error === "" ? head : `${head}\n${error}`
}
