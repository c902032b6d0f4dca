// A compute thread of the threaded engine: instantiates the same wasm module
// on the engine's shared memory, takes its own stack, and serves the pool
// (wlm_worker_loop sleeps in memory.atomic.wait32 between jobs and returns
// when the engine frees the pool). Node worker_threads and Web Workers alike.

// A memory64 (wasm64) build (`build`: its describeModule(), web/memory64.js)
// has an i64 stack pointer and pool address.

// Node built-ins come through nodeImport (web/env.js), which bundlers leave alone.
import { isNode, nodeImport } from '../env.js';
import { wrapExports } from '../memory64.js';

function serve({ module, memory, pool, tid, stackTop, build }, post) {
  const inst = new WebAssembly.Instance(module, { env: { memory } });
  const sp = inst.exports.__stack_pointer;
  sp.value = typeof sp.value === 'bigint' ? BigInt(stackTop) : stackTop;
  const x = build ? wrapExports(inst.exports, build) : inst.exports;
  post({ ready: tid });
  x.wlm_worker_loop(pool, tid);
  post({ exited: tid });
}

if (isNode) {
  nodeImport('node:worker_threads').then(({ parentPort }) => {
    parentPort.once('message', (m) => { serve(m, (x) => parentPort.postMessage(x)); parentPort.close(); });
  });
} else {
  self.onmessage = (ev) => { self.onmessage = null; serve(ev.data, (x) => self.postMessage(x)); self.close(); };
}
