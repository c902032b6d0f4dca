// Runs a wasm32-wasi test program (the C test suite built for wasm) in Node.
import { WASI } from 'node:wasi';
import fs from 'node:fs';
import path from 'node:path';
process.removeAllListeners('warning');
const [, , file, ...args] = process.argv;
const wasi = new WASI({
  version: 'preview1',
  args: [file, ...args],
  env: {
    WLM_TEST_DATA: process.env.WLM_TEST_DATA ? path.resolve(process.env.WLM_TEST_DATA) : path.resolve('../shared'),
    WLM_TEST_BUILD: path.resolve(process.env.WLM_TEST_BUILD || 'build'), // WASI has no cwd: absolute
  },
  preopens: { '/': '/' },
  returnOnExit: true,
});
const mod = await WebAssembly.compile(fs.readFileSync(file));
const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
process.exitCode = wasi.start(inst);
