// Picks the SIMD flavour by a known-answer probe, not by validation alone:
// a relaxed instruction that validates may still compute something else
// (a Node 20 build behind --experimental-wasm-relaxed-simd computed
// i32x4.relaxed_dot_i8x16_i7x16_add wrongly: docs/kernels.md). The probe module runs
// i16x8.relaxed_dot_i8x16_i7x16_s on fixed inputs; we compare with the
// definition computed here in plain JS.

function expected(seed) {
  const a = [], b = [];
  for (let i = 0; i < 16; i++) { a.push(((i * 37 + seed) % 256) - 128); b.push((i * 11 + seed) % 128); }
  const w = [1, 3, 5, 7, 11, 13, 17, 19];
  let s = 0;
  for (let l = 0; l < 8; l++) s += (a[2 * l] * b[2 * l] + a[2 * l + 1] * b[2 * l + 1]) * w[l];
  return s;
}

/** @param {BufferSource|WebAssembly.Module} probe the bytes of wasm/probe-relaxed.wasm */
export async function probeRelaxedSimd(probe) {
  try {
    const mod = probe instanceof WebAssembly.Module ? probe : await WebAssembly.compile(probe);
    const { exports } = await WebAssembly.instantiate(mod, {});
    for (const seed of [0, 1, 77, 200]) if (exports.probe(seed) !== expected(seed)) return false;
    return true;
  } catch {
    return false; // relaxed SIMD missing: the module does not compile
  }
}
