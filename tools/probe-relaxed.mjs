// Exit 0 when this JS engine runs relaxed SIMD correctly (known answer), 1 otherwise.
import fs from 'node:fs';
import { probeRelaxedSimd } from '../web/simd-probe.js';
const bytes = fs.readFileSync(new URL('../wasm/probe-relaxed.wasm', import.meta.url));
process.exit((await probeRelaxedSimd(bytes)) ? 0 : 1);
