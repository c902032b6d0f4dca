#!/usr/bin/env node
// Runs the WASI command build of the engine (wasm/wasmlm-cli.wasm, built
// from src/cli/wasi.c by `make wasm`) under node:wasi: the same engine as a
// plain WASI program, single-threaded, for offline batch generation.
//
//   wasmlm-wasi generate -m MODEL.gguf (-p PROMPT | --prompts FILE) [-n N] [--temp T] ... [--jsonl]
//   wasmlm-wasi info MODEL.gguf
//   wasmlm-wasi tokenize -m MODEL.gguf -p TEXT
//
// MODEL is a file path (registry names are resolved to the local file first:
// WASMLM_MODELS or the download cache). The program sees the host file
// system through one preopen of '/': paths are made absolute here. Any other
// WASI runtime works the same: `wasmtime --dir=/ wasm/wasmlm-cli.wasm generate -m /abs/model.gguf -p "..."`.
// Node 20's WASI aborts when a program's memory grows past about 60 MB:
// fine for small models; use the JS API (loadModel) for large ones.
import { WASI } from 'node:wasi';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const WASM = process.env.WASMLM_WASI_CLI || fileURLToPath(new URL('../../wasm/wasmlm-cli.wasm', import.meta.url));

export async function runWasiCli(argv, { stdout = 1, stderr = 2 } = {}) {
  const args = argv.slice();
  // registry name -> local file (WASMLM_MODELS, the cache, or a verified download)
  const modelPath = async (v) => {
    if (!fs.existsSync(v) && /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(v) && !v.endsWith('.gguf')) {
      const { resolveModel } = await import('../../models/registry.js');
      v = (await resolveModel(v)).path;
    }
    return path.resolve(v);
  };
  for (let i = 0; i < args.length; i++) {
    if ((args[i] === '-m' || args[i] === '--model') && i + 1 < args.length) { args[i + 1] = await modelPath(args[i + 1]); i++; }
    else if (args[i] === '--prompts' && i + 1 < args.length) { args[i + 1] = path.resolve(args[i + 1]); i++; }
  }
  if (args[0] === 'info' && args[1]) args[1] = await modelPath(args[1]);
  let bytes;
  try { bytes = fs.readFileSync(WASM); } catch (e) {
    throw new Error(`cannot read ${WASM}: ${e.code || e.message} (build it with 'make wasm')`);
  }
  const wasi = new WASI({ version: 'preview1', args: ['wasmlm-cli', ...args], env: {}, preopens: { '/': '/' }, returnOnExit: true, stdout, stderr });
  const mod = await WebAssembly.compile(bytes);
  const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
  return wasi.start(inst);
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.removeAllListeners('warning');   // node:wasi's "experimental" notice
  runWasiCli(process.argv.slice(2)).then((code) => { process.exitCode = code; },
    (e) => { console.error(`error: ${e.message}`); process.exitCode = 1; });
}
