/** Types of bundle-cli.mjs (for the tests). */
export declare const bundleCli: (options: {
  readonly outfile: string
  readonly define?: Readonly<Record<string, string>>
}) => Promise<{ readonly buildId: string; readonly metafile: import("esbuild").Metafile }>
