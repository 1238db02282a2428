/**
 * The sweep's engine service, where it was before the sweep program got its rooms: it lives in
 * programs/Sweep/Engine.ts now.
 */
export * from "./Sweep/Engine.js"
