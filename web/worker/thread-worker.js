// A compute thread of the threaded engine: instantiates the same wasm module
// on the engine's shared memory, takes its own stack, and serves the pool
// (wlm_worker_loop sleeps in memory.atomic.wait32 between jobs and returns
// when the engine frees the pool). Node worker_threads and Web Workers alike.

// Node built-ins come through nodeImport (web/env.js), which bundlers leave alone.
import { isNode, nodeImport } from '../env.js';

function serve({ module, memory, pool, tid, stackTop }, post) {
  const inst = new WebAssembly.Instance(module, { env: { memory } });
  inst.exports.__stack_pointer.value = stackTop;
  post({ ready: tid });
  inst.exports.wlm_worker_loop(pool, tid);
  post({ exited: tid });
}

if (isNode) {
  nodeImport('node:worker_threads').then(({ parentPort }) => {
    parentPort.once('message', (m) => { serve(m, (x) => parentPort.postMessage(x)); parentPort.close(); });
  });
} else {
  self.onmessage = (ev) => { self.onmessage = null; serve(ev.data, (x) => self.postMessage(x)); self.close(); };
}
