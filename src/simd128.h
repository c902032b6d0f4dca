/* Small SIMD128 helpers shared by the kernel files (kernels_simd128.c,
 * kquants_simd128.c). Include only under __wasm_simd128__. */
#ifndef WLM_SIMD128_H
#define WLM_SIMD128_H
#include <wasm_simd128.h>

/* four IEEE halves (in the low 16 bits of each u32 lane) to floats, exactly
 * as wlm_f16_to_f32 does it */
static inline v128_t half4_to_f32(v128_t h) {
    v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
    v128_t fin = wasm_f32x4_mul(wasm_i32x4_shl(em, 13), wasm_f32x4_splat(0x1p112f));
    v128_t inf = wasm_v128_or(wasm_i32x4_splat(0x7f800000), wasm_i32x4_shl(wasm_v128_and(em, wasm_i32x4_splat(0x3ff)), 13));
    v128_t is_inf = wasm_i32x4_ge(em, wasm_i32x4_splat(0x7c00));
    return wasm_v128_or(sign, wasm_v128_bitselect(inf, fin, is_inf));
}

/* the high nibbles of 16 bytes (q >> 4 per byte): a 16-bit shift and the
 * low-nibble mask. wasm's i8x16.shr_u has no x64 instruction: V8 emits a
 * 16-bit shift and rebuilds its own mask constant at every use. */
static inline v128_t hi_nibbles(v128_t q) { return wasm_v128_and(wasm_u16x8_shr(q, 4), wasm_i8x16_splat(15)); }

#endif
