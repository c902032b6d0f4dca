// Re-quantization of the loaded model into a new GGUF file (wlm_quantize).
import { EngineError } from '../errors.js';
import { QUANT_TYPES } from '../protocol.js';

/**
 * Re-quantizes the model of `eng` to `type` (a QUANT_TYPES name or a GGML
 * type id). `sink(view)` receives a view of the output bytes in wasm memory
 * (valid until the next engine call).
 * @returns {{report: string, size: number}}
 */
export function quantizeModel(eng, type, sink) {
  eng.requireModel();
  const t = typeof type === 'number' ? type : QUANT_TYPES[String(type).toLowerCase()];
  if (t === undefined) throw new EngineError(`unknown quantization type '${type}' (use ${Object.keys(QUANT_TYPES).join(', ')})`, 1);
  const x = eng.x;
  eng.clearError();
  eng.check(x.wlm_quantize_size(eng.model, t, eng.at('u64'), eng.at('err')), 'quantize');
  const size = Number(eng.dv.getBigUint64(eng.at('u64'), true));
  const out = eng.alloc(size);
  // the report: a line per tensor
  const repCap = 65536 + 256 * (x.wlm_tensor_count(eng.model) >>> 0);
  let rep = 0;
  try {
    rep = eng.alloc(repCap);
    eng.clearError();
    eng.check(x.wlm_quantize(eng.model, t, out, BigInt(size), rep, repCap, eng.at('err')), 'quantize');
    const report = eng.cstrz(rep, repCap);
    sink(eng.u8.subarray(out, out + size));
    return { report, size };
  } finally {
    eng.free(out); eng.free(rep);
  }
}
