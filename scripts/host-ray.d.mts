/** Types of host-ray.mjs (for the tests). */
export declare const rayProcessKind: (comm: string, argv: ReadonlyArray<string>) => string | undefined
export declare const rayProcesses: (procRoot?: string) => Array<{ pid: number; kind: string }>
export declare const refusal: (
  env: Readonly<Record<string, string | undefined>>,
  procRoot?: string
) => string | undefined
