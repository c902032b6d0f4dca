/* Known-answer probe for relaxed SIMD, built as its own tiny module
 * (wasm/probe-relaxed.wasm). The JS glue instantiates it and checks the
 * result before it loads the relaxed-SIMD engine: an engine whose relaxed
 * instructions are missing fails to compile, and one whose results differ
 * from the definition (seen: Node 20's baseline compiler doubling
 * i32x4.relaxed_dot_i8x16_i7x16_add) fails the check. */
#include <wasm_simd128.h>

__attribute__((export_name("probe"))) int probe(int seed) {
    signed char a[16], b[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (signed char)((i * 37 + seed) % 256 - 128);
        b[i] = (signed char)((i * 11 + seed) % 128);
    }
    v128_t r = wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a), wasm_v128_load(b));
    /* checksum of the 8 lanes, each a[2i]b[2i] + a[2i+1]b[2i+1] */
    int s = 0;
    s += wasm_i16x8_extract_lane(r, 0) * 1;
    s += wasm_i16x8_extract_lane(r, 1) * 3;
    s += wasm_i16x8_extract_lane(r, 2) * 5;
    s += wasm_i16x8_extract_lane(r, 3) * 7;
    s += wasm_i16x8_extract_lane(r, 4) * 11;
    s += wasm_i16x8_extract_lane(r, 5) * 13;
    s += wasm_i16x8_extract_lane(r, 6) * 17;
    s += wasm_i16x8_extract_lane(r, 7) * 19;
    return s;
}
