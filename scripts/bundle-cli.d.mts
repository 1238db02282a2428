/** Types of bundle-cli.mjs (for the tests). */
export declare const bundleCli: (options: {
  readonly outfile: string
}) => Promise<{ readonly buildId: string }>
