/* The wasm SIMD intrinsics and small helpers shared by the kernel files
 * (kernels_simd128.c, quants_simd128.c). Include only under WLM_SIMD128
 * (base.h).
 *
 * The wasm builds take the intrinsics from clang's wasm_simd128.h. Native
 * builds (-DWLM_SIMDE) take them from SIMDe (Debian's libsimde-dev), which
 * implements each wasm operation with its exact semantics on the host's SIMD
 * (SSE/AVX, NEON) or in plain C: the same kernel source runs natively, for
 * the C tests under sanitizers and for the native baseline of the benchmark.
 * The one relaxed operation the kernels use is defined below for that case,
 * on the inputs where every implementation agrees (second operand 0..127). */
#ifndef WLM_SIMD128_H
#define WLM_SIMD128_H
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>
/* the unsigned constructors SIMDe 0.7 lacks */
#define wasm_u8x16_make(...) wasm_i8x16_make(__VA_ARGS__)
#define wasm_u32x4_make(a, b, c, d) wasm_i32x4_make((int32_t)(a), (int32_t)(b), (int32_t)(c), (int32_t)(d))
#if WLM_RELAXED
/* i16x8.relaxed_dot_i8x16_i7x16_s: lane i = a[2i] b[2i] + a[2i+1] b[2i+1],
 * a signed, b in 0..127 (|lane| <= 2 * 128 * 127: no overflow). x86 with
 * SSSE3: pmaddubsw, which takes the unsigned operand first (with b < 128 its
 * saturation cannot occur); elsewhere even and odd bytes widened to int16 */
#if defined(__SSSE3__)
#include <tmmintrin.h>
static inline v128_t wasm_i16x8_relaxed_dot_i8x16_i7x16(v128_t a, v128_t b) { return _mm_maddubs_epi16(b, a); }
#else
static inline v128_t wasm_i16x8_relaxed_dot_i8x16_i7x16(v128_t a, v128_t b) {
    v128_t even = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(a, 8), 8), wasm_v128_and(b, wasm_i16x8_splat(0xff)));
    v128_t odd = wasm_i16x8_mul(wasm_i16x8_shr(a, 8), wasm_u16x8_shr(b, 8));
    return wasm_i16x8_add(even, odd);
}
#endif
#endif
#endif

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
