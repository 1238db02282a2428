/** Types of examples/engine-model.mjs (the stand-in engine's performance model); read its header. */
export interface ModelSettings {
  readonly maxNumSeqs: number
  readonly maxModelLen: number
  readonly gpuMemoryUtilization: number
  readonly decodeMs: number
  readonly decodeMsPerSeq: number
  readonly kvTokens: number
  readonly queueMs: number
  readonly maxNumBatchedTokens: number
  readonly quantization: string
  readonly coldRequests: number
  readonly coldFactor: number
  readonly capped: boolean
}
export interface Load {
  readonly concurrency: number
  readonly numPrompts: number
  readonly inputLen?: number
  readonly outputLen: number
}
export interface Prediction {
  readonly outputThroughput: number
  readonly requestThroughput: number
  readonly medianTtftMs: number
  readonly p99TtftMs: number
  readonly medianTpotMs: number
  readonly p99TpotMs: number
  readonly durationMs: number
  readonly batch: number
}
export declare const DEFAULTS: ModelSettings
export declare const FP8_STEP_FACTOR: number
export declare const COLD_START_REQUESTS: number
export declare const KNOWN_PROMPTS: ReadonlyArray<{
  readonly prompt: string
  readonly answer: string
  readonly wrong: string
}>
export declare const effective: (settings: ModelSettings) => ModelSettings
export declare const answerFor: (settings: ModelSettings, prompt: string) => string | undefined
export declare const VALIDITY: {
  readonly engineArgs: ReadonlyArray<string>
  readonly params: ReadonlyArray<{ readonly name: string; readonly values: ReadonlyArray<string> }>
  readonly load: Load
  readonly trueBest: Readonly<Record<string, string>>
}
export declare const KV_BYTES_PER_TOKEN: number
export declare const ACTIVATION_TOKENS_PER_BATCHED_TOKEN: number
export declare const prefillSteps: (settings: ModelSettings, promptTokens: number) => number
export declare const modelFlags: (argv: ReadonlyArray<string>) => ModelSettings
export declare const stepMs: (settings: ModelSettings, b: number) => number
export declare const kvTokensAvailable: (settings: ModelSettings) => number
export declare const kvTokensNeeded: (settings: ModelSettings) => number
export declare const kvFailure: (settings: ModelSettings) => ReadonlyArray<string> | undefined
export declare const percentile: (xs: ReadonlyArray<number>, p: number) => number
export declare const waves: (
  settings: ModelSettings,
  load: Load
) => {
  readonly durationMs: number
  readonly requests: ReadonlyArray<{ readonly ttftMs: number; readonly tpotMs: number; readonly e2elMs: number }>
}
export declare const predict: (settings: ModelSettings, load: Load) => Prediction
export declare const THREE_AXES: {
  readonly engineArgs: ReadonlyArray<string>
  readonly params: ReadonlyArray<{ readonly name: string; readonly values: ReadonlyArray<string> }>
  readonly load: Load & { readonly inputLen: number }
}
