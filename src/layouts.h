/* Activation and weight layouts the SIMD kernels read (layouts.c writes the
 * reference bytes of each): the i16x4, i8x4, i16eo, i16g and q4gb forms
 * of Q8_0 activations and Q8_0/Q4_0 rows, and the q4g repack of Q4_0
 * matrices. Each form only rearranges exact values, so a kernel reading it
 * gives the bits of the plain dot product. */
#ifndef WLM_LAYOUTS_H
#define WLM_LAYOUTS_H

#include "base.h"
#include "ggml_types.h"

/* Q8_0 / Q4_0 row -> the i16x4 form of gemm_i16x4 (exact): blocks in
 * groups of four, 128 int16 per group where element k of block 4g+i sits at
 * g*128 + (k/2)*8 + i*2 + k%2 (so one i32x4.dot_i16x8 lane sums pairs of one
 * block); blocks past the last group of four stay in order (b*32 + k); then
 * the nb block scales as floats at byte offset 2n. */
void wlm_unpack_i16x4(uint32_t type, const void *row, uint8_t *out, uint32_t n);
static inline uint64_t wlm_i16x4_row_bytes(uint32_t n) { return (uint64_t)n * 2 + (uint64_t)n / 32 * 4; }
/* The i8x4 form of the relaxed-SIMD Q4_0 prefill (gemm_q4_i8x4): blocks in
 * groups of four, 128 bytes per group where value k of block 4g+i sits at
 * g*128 + (k/4)*16 + i*4 + k%4 (so one i16x8.relaxed_dot_i8x16_i7x16 pair of
 * lanes, and after a pairwise add one i32 lane, sums values of one block);
 * blocks past the last group of four stay in order (b*32 + k); then the nb
 * block scales as floats at byte offset n. Q4_0 weights: the nibbles q
 * (0..15, without the -8); Q8_0 activations: the int8 values, and after the
 * scales the nb exact block sums as int32 (the -8 is taken off as 8 * sum). */
void wlm_unpack_q4_i8x4(const block_q4_0 *row, uint8_t *out, uint32_t n);
void wlm_act_i8x4(const block_q8_0 *x, uint8_t *out, uint32_t n);
static inline uint64_t wlm_q4_i8x4_row_bytes(uint32_t n) { return (uint64_t)n + (uint64_t)n / 32 * 4; }
static inline uint64_t wlm_act_i8x4_row_bytes(uint32_t n) { return (uint64_t)n + (uint64_t)n / 32 * 8; }
/* Q8_0 activation row -> the i16eo form of gemv_q8_0/gemv_q4_0 (exact): per
 * block the 32 values widened to int16 in the order even 0-14, odd 1-15,
 * even 16-30, odd 17-31 (the order a weight block's bytes fall into when
 * read as int16 lanes); then the nb scales as floats at byte offset 2n; then
 * the nb exact block sums as int32 at 2n + 4 nb. */
void wlm_act_i16eo(const block_q8_0 *x, uint8_t *out, uint32_t n);
/* the same for blocks [b0, b1) only (each block converts on its own) */
void wlm_act_i16eo_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
static inline uint64_t wlm_i16eo_row_bytes(uint32_t n) { return (uint64_t)n * 2 + (uint64_t)n / 32 * 8; }
/* position of value k (0..31) of a block in the i16eo order */
static inline uint32_t wlm_i16eo_pos(uint32_t k) { return (k & 16) + ((k & 1) << 3) + ((k & 15) >> 1); }
/* ---- Q4_0 matrices in groups ("q4g") ----------------------------------------
 * wlm_model_load_inplace rearranges every Q4_0 matrix that is only ever
 * multiplied (not the token embeddings) row by row, in place, once: each
 * group of four blocks (72 bytes) becomes the four f16 scales, then 64
 * bytes where byte 16p + 4i + j (p, i, j < 4) holds value 4p + j of block
 * 4g + i in its low nibble and value 4p + j + 16 in its high nibble (that
 * is, the block's qs[4p + j]). Blocks after the last whole group stay as
 * they were, and so does the row's size. Read 16 bytes at a time, the
 * nibbles are already the i8x4 form (relaxed SIMD), and read as int16 lanes
 * every pair of lanes belongs to one block (SIMD128 gemv_q4g): the kernels
 * need no unpacking or transposition at run time. */
void wlm_q4g_from_q4_0(uint8_t *row, uint32_t n); /* in place */
void wlm_q4g_to_q4_0(const uint8_t *row, block_q4_0 *out, uint32_t n);
/* value k (0..31, the nibble 0..15) and f16 scale of block b of a q4g row */
static inline uint32_t wlm_q4g_q(const uint8_t *row, uint32_t nb, uint32_t b, uint32_t k) {
    if (b >= nb / 4 * 4) {
        const block_q4_0 *B = (const block_q4_0 *)row + b;
        return k < 16 ? B->qs[k] & 15u : (uint32_t)B->qs[k - 16] >> 4;
    }
    uint8_t v = row[(uint64_t)(b / 4) * 72 + 8 + ((k & 15) / 4) * 16 + (b % 4) * 4 + k % 4];
    return k < 16 ? v & 15u : (uint32_t)v >> 4;
}
static inline uint16_t wlm_q4g_d(const uint8_t *row, uint32_t nb, uint32_t b) {
    const uint8_t *p = b >= nb / 4 * 4 ? row + (uint64_t)b * sizeof(block_q4_0) : row + (uint64_t)(b / 4) * 72 + (b % 4) * 2;
    return (uint16_t)(p[0] | p[1] << 8);
}
/* dot_q4_0 of the same values on a q4g row, scalar (reference and the
 * fallback of the SIMD kernels for an infinite or NaN scale) */
float wlm_dot_q4g(uint32_t n, const uint8_t *row, const block_q8_0 *x);
/* The i16g activation form of SIMD128's gemv_q4g: the i16eo form, except
 * that the values of each whole group of four blocks sit where the weight
 * nibbles fall when a q4g group is read as int16 lanes (wlm_i16g_pos);
 * blocks after the last group in the i16eo order; then scales and sums as
 * in i16eo. Blocks [b0, b1) only. */
void wlm_act_i16g_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
/* wlm_act_i8x4 for blocks [b0, b1) only */
void wlm_act_i8x4_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
/* int16 index of value k of block b in the i16g form of a row of nb blocks:
 * in group g, slice p = (k mod 16) / 4 of the weights, vector f (0: low
 * nibbles of the even bytes, 1: their high nibbles, 2 and 3: the same for
 * the odd bytes), lane 2 (b mod 4) + (k mod 4) / 2 */
static inline uint32_t wlm_i16g_pos(uint32_t b, uint32_t nb, uint32_t k) {
    if (b >= nb / 4 * 4) return b * 32 + wlm_i16eo_pos(k);
    uint32_t j = k % 4, f = (j & 1) * 2 + (k >= 16);
    return (b / 4) * 128 + ((k & 15) / 4) * 32 + f * 8 + (b % 4) * 2 + j / 2;
}
/* Q4_0 prefill from q4g rows in the SIMD128 set: wlm_unpack_i16x4 of the
 * same values with the type WLM_Q4G */
#define WLM_Q4G 0x100u
/* The q4gb form of a batch of activations for gemm_q4gb (relaxed SIMD):
 * tokens in chunks of four, a chunk wlm_q4gb_chunk_bytes(n) bytes; in a
 * chunk, whole groups of four blocks (n / 128 of them) of 640 bytes each:
 * byte 64v + 16j + 4i + m holds value 4v + m of block 4g + i of the
 * chunk's token j (v < 8: the i8x4 form's vectors; j, i, m < 4),
 * then at 512 + 16j the four block scales of token j as floats and at
 * 576 + 16j eight int16: at 2i + h, -8 times the sum of block i's values
 * 4v + m with m / 2 = h (the values whose products gemm_q4gb's dots add into
 * that lane; the kernel's sums start there, so no -8 * sum correction is
 * left for the float step; |sum| <= 8 x 16 x 128 = 16384 at every step). Blocks after
 * the last group are not in the form (the kernel reads their Q8_0 blocks).
 * wlm_act_q4gb_row writes token t's part (its slots only). */
/* tokens a chunk (8 measured slower: the kernel's 8 int16 sums, 8 float
 * accumulators and the loaded vectors do not fit V8's 15 registers) */
#define WLM_Q4GB_T 4
static inline uint64_t wlm_q4gb_chunk_bytes(uint32_t n) { return (uint64_t)(n / 128) * 160 * WLM_Q4GB_T; }
void wlm_act_q4gb_row(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t);
/* floats of a q4g row (wlm_dequantize_row of the Q4_0 blocks it came from) */
void wlm_dequantize_q4g_row(const uint8_t *row, float *y, uint32_t n);

#endif
