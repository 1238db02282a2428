/** Types of gcs-codec.mjs (for the tests). */
export declare const generateGcsCodecBody: (protoFile: string) => string
export declare const generateGcsCodecModule: (protoFile: string) => string
