// Where this code runs, decided once for the whole package: isNode, and
// nodeImport for Node built-ins (through a variable, so that bundlers leave
// them out of browser bundles and print no "externalized" warnings).

/** True in Node (main thread or worker_threads), false in browsers and browser workers (which have `self`). */
export const isNode = typeof process !== 'undefined' && !!(process.versions && process.versions.node) &&
  typeof window === 'undefined' && typeof self === 'undefined';

/** Imports a Node built-in ('node:fs', ...) without bundlers following it. */
export const nodeImport = (name) => import(/* @vite-ignore */ /* webpackIgnore: true */ name);
