/* Known-answer probe for the memory64 (wasm64) engine builds, built as its
 * own tiny module (wasm/probe-memory64.wasm) with the same features as the
 * wasm64 engine: a 64-bit memory imported from JS, a 64-bit function table
 * (clang emits one for wasm64 as soon as a function's address is taken),
 * SIMD128 loads at 64-bit addresses. The JS glue compiles it, creates a
 * memory64 memory of the engine's maximum size and checks the result before
 * it picks a wasm64 engine: a runtime without memory64 (or with an early
 * implementation: Node 20 behind --experimental-wasm-memory64 refuses the
 * 64-bit table and caps a memory at 4 GiB) fails one of these steps. */
#include <stdint.h>
#include <wasm_simd128.h>

typedef uint32_t (*mix_fn)(uint32_t, uint32_t);
static uint32_t mix_add(uint32_t a, uint32_t b) { return a * 31u + b; }
static uint32_t mix_xor(uint32_t a, uint32_t b) { return (a ^ b) * 17u; }
/* volatile: the calls stay indirect (through the table) */
static mix_fn volatile mixes[2] = { mix_add, mix_xor };
static uint8_t buf[64];

/* bytes buf[i] = i * 7 + seed, summed with SIMD, then mixed with the seed by
 * mixes[seed & 1] */
__attribute__((export_name("probe")))
uint32_t
probe(uint32_t seed) {
    for (int i = 0; i < 64; i++) buf[i] = (uint8_t)(i * 7 + seed);
    v128_t acc = wasm_i32x4_splat(0);
    for (int i = 0; i < 64; i += 16)
        acc = wasm_i32x4_add(acc, wasm_u32x4_extadd_pairwise_u16x8(wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_load(buf + i))));
    uint32_t total = wasm_i32x4_extract_lane(acc, 0) + wasm_i32x4_extract_lane(acc, 1) + wasm_i32x4_extract_lane(acc, 2) +
        wasm_i32x4_extract_lane(acc, 3);
    return mixes[seed & 1](total, seed);
}

/* 8 in a wasm64 build */
__attribute__((export_name("pointer_bytes")))
uint32_t
pointer_bytes(void) { return (uint32_t)sizeof(void *); }
