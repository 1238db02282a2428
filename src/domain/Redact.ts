/**
 * Secrets in what hyperloom shows or keeps (issue 27 item 7). A server string such as
 * `vllm serve M --api-key sk-…` or `HF_TOKEN=hf_… vllm serve M` runs as written, but everything
 * hyperloom shows or keeps of it — the host queue's ticket (world-readable: `hyperloom queue`
 * shows it to every user of the host), sweep.json, state.json, `sweep show`, the report, the log
 * lines — holds it with the secret's value replaced by `REDACTED` (a plain word: a line pasted
 * from `sweep show` still parses in a shell, and fails loudly instead of using a stale key).
 *
 * Known shapes only, so ordinary values stay readable:
 * - an option named like a secret, as `--api-key VALUE` or `--api-key=VALUE` (`--api-key`,
 *   `--token`, `--hf-token`, `--password`, `--secret`, `--*-api-key`, `--*-token`, …);
 * - an environment assignment `NAME=VALUE` where NAME is `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN` or
 *   ends in `_KEY`, `_TOKEN`, `_SECRET`, `_PASSWORD` (`OPENAI_API_KEY=…`);
 * - bare token shapes anywhere: OpenAI-style `sk-…`, Hugging Face `hf_…`, GitHub `ghp_…`/
 *   `github_pat_…`, and `Bearer …` in a header.
 * Pure.
 */

export const REDACTED = "REDACTED"

/** An option whose value is a secret (matched without its leading dashes, case-insensitive). */
const SECRET_OPTION = /^(?:[a-z0-9]+[-_])*(?:api[-_]?key|token|password|passwd|secret|access[-_]key)$/i

/** An environment variable whose value is a secret. */
const SECRET_ENV = /^(?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|[A-Za-z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD))$/

/** A value as a shell string writes it: quoted ('…' or "…") or a run of non-blank characters. */
const VALUE = String.raw`(?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'"]+)+`

const OPTION_IN_TEXT = new RegExp(
  String.raw`(^|[\s'"])(--?([A-Za-z0-9][A-Za-z0-9_-]*))(=|\s+)(${VALUE})`,
  "g"
)
const ENV_IN_TEXT = new RegExp(String.raw`(^|[\s'";])([A-Za-z_][A-Za-z0-9_]*)=(${VALUE})`, "g")
const TOKENS: ReadonlyArray<RegExp> = [
  /\bsk-[A-Za-z0-9_-]{8,}/g,
  /\bhf_[A-Za-z0-9]{8,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{8,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{8,}/g,
  /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi
]

const redactTokens = (text: string): string =>
  TOKENS.reduce(
    (t, re) =>
      t.replace(re, (_whole, bearer?: string) =>
        typeof bearer === "string" ? `${bearer}${REDACTED}` : REDACTED
      ),
    text
  )

/** A command line (or any text) with every known secret shape's value replaced by `REDACTED`. */
export const redactText = (text: string): string =>
  redactTokens(
    text
      .replace(
        OPTION_IN_TEXT,
        (whole, lead: string, option: string, name: string, sep: string, value: string) =>
          SECRET_OPTION.test(name) && !value.startsWith("-") ? `${lead}${option}${sep}${REDACTED}` : whole
      )
      .replace(ENV_IN_TEXT, (whole, lead: string, name: string) =>
        SECRET_ENV.test(name) ? `${lead}${name}=${REDACTED}` : whole
      )
  )

const isSecretOption = (arg: string) =>
  /^--?[A-Za-z0-9]/.test(arg) && SECRET_OPTION.test(arg.replace(/^--?/, ""))

/** An argv with every known secret's value replaced: the element after `--api-key`, and each element as `redactText`. */
export const redactArgv = (argv: ReadonlyArray<string>): Array<string> =>
  argv.map((arg, i) =>
    i > 0 && isSecretOption(argv[i - 1]!) && !arg.startsWith("-") ? REDACTED : redactText(arg)
  )

/** A sweep's experiment as kept and shown (sweep.json, `sweep show`, the report): its server string and client argv redacted. */
export const redactExperiment = <
  E extends { readonly server: string; readonly client: ReadonlyArray<string> }
>(
  e: E
): E => ({ ...e, server: redactText(e.server), client: redactArgv(e.client) })
