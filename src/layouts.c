/* The reference bytes of every activation and weight layout the SIMD
 * kernels read (layouts.h describes each): written here in plain C, and
 * written by the kernel sets' own versions bit for bit the same. */
#include "layouts.h"

void wlm_unpack_i16x4(uint32_t type, const void *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32, full = nb / 4 * 4;
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    for (uint32_t b = 0; b < nb; b++) {
        int16_t v[32];
        if (type == WLM_Q4G) {
            d[b] = wlm_f16_to_f32(wlm_q4g_d(row, nb, b));
            for (int k = 0; k < 32; k++) v[k] = (int16_t)((int)wlm_q4g_q(row, nb, b, (uint32_t)k) - 8);
        } else if (type == GGML_Q4_0) {
            const block_q4_0 *x = (const block_q4_0 *)row + b;
            d[b] = wlm_f16_to_f32(x->d);
            for (int j = 0; j < 16; j++) {
                v[j] = (int16_t)((x->qs[j] & 15) - 8);
                v[j + 16] = (int16_t)((x->qs[j] >> 4) - 8);
            }
        } else {
            const block_q8_0 *x = (const block_q8_0 *)row + b;
            d[b] = wlm_f16_to_f32(x->d);
            for (int j = 0; j < 32; j++) v[j] = x->qs[j];
        }
        if (b < full) {
            int16_t *g = q + (b / 4) * 128 + (b % 4) * 2;
            for (int k = 0; k < 32; k++) g[(k / 2) * 8 + (k & 1)] = v[k];
        } else {
            for (int k = 0; k < 32; k++) q[b * 32 + k] = v[k];
        }
    }
}

/* byte offset of value k (0..31) of block b in the i8x4 form of a row of nb
 * blocks: within the groups of four, interleaved by 4 bytes; after them, in
 * order */
static inline uint64_t i8x4_at(uint32_t b, uint32_t nb, uint32_t k) {
    if (b >= nb / 4 * 4) return (uint64_t)b * 32 + k;
    return (uint64_t)(b / 4) * 128 + (k / 4) * 16 + (b % 4) * 4 + k % 4;
}

void wlm_unpack_q4_i8x4(const block_q4_0 *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32;
    float *d = (float *)(out + n);
    for (uint32_t b = 0; b < nb; b++) {
        for (uint32_t k = 0; k < 32; k++) out[i8x4_at(b, nb, k)] = k < 16 ? row[b].qs[k] & 15 : row[b].qs[k - 16] >> 4;
        d[b] = wlm_f16_to_f32(row[b].d);
    }
}

void wlm_act_i8x4(const block_q8_0 *x, uint8_t *out, uint32_t n) { wlm_act_i8x4_blocks(x, out, n, 0, n / 32); }

void wlm_act_i8x4_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) {
    uint32_t nb = n / 32;
    float *d = (float *)(out + n);
    int32_t *sum = (int32_t *)(out + n + (uint64_t)nb * 4);
    for (uint32_t b = b0; b < b1; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) {
            ((int8_t *)out)[i8x4_at(b, nb, k)] = x[b].qs[k];
            s += x[b].qs[k];
        }
        d[b] = wlm_f16_to_f32(x[b].d);
        sum[b] = s;
    }
}

void wlm_act_q4gb_row(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t) {
    uint8_t *o = xb + t / WLM_Q4GB_T * wlm_q4gb_chunk_bytes(n) + 16 * (t % WLM_Q4GB_T);
    for (uint32_t g = 0; g < n / 128; g++, o += 160 * WLM_Q4GB_T)
        for (uint32_t i = 0; i < 4; i++) {
            const block_q8_0 *B = x + 4 * g + i;
            int16_t s[2] = { 0, 0 }; /* -8 x the values the kernel's int16 lanes 2i, 2i + 1 take */
            for (uint32_t k = 0; k < 32; k++) {
                o[16 * WLM_Q4GB_T * (k / 4) + 4 * i + k % 4] = (uint8_t)B->qs[k];
                s[k % 4 / 2] = (int16_t)(s[k % 4 / 2] - 8 * B->qs[k]);
            }
            float d = wlm_f16_to_f32(B->d);
            wlm_memcpy(o + 128 * WLM_Q4GB_T + 4 * i, &d, 4);
            wlm_memcpy(o + 144 * WLM_Q4GB_T + 4 * i, s, 4);
        }
}

/* ---- q4g ---- */
void wlm_q4g_from_q4_0(uint8_t *row, uint32_t n) {
    uint32_t ng = n / 32 / 4;
    for (uint32_t g = 0; g < ng; g++) {
        uint8_t *p = row + (uint64_t)g * 72, t[72];
        wlm_memcpy(t, p, 72);
        const block_q4_0 *B = (const block_q4_0 *)t;
        for (uint32_t i = 0; i < 4; i++) {
            p[i * 2] = (uint8_t)(B[i].d & 0xff);
            p[i * 2 + 1] = (uint8_t)(B[i].d >> 8);
            for (uint32_t k = 0; k < 16; k++) p[8 + (k / 4) * 16 + i * 4 + k % 4] = B[i].qs[k];
        }
    }
}

void wlm_q4g_to_q4_0(const uint8_t *row, block_q4_0 *out, uint32_t n) {
    uint32_t nb = n / 32;
    for (uint32_t b = 0; b < nb; b++) {
        out[b].d = wlm_q4g_d(row, nb, b);
        for (uint32_t k = 0; k < 16; k++) out[b].qs[k] = (uint8_t)(wlm_q4g_q(row, nb, b, k) | wlm_q4g_q(row, nb, b, k + 16) << 4);
    }
}

/* dot_q4_0's order: four running sums by block index mod 4, the tail in order */
float wlm_dot_q4g(uint32_t n, const uint8_t *row, const block_q8_0 *x) {
    uint32_t nb = n / 32, full = nb / 4 * 4;
    float a[4] = { 0, 0, 0, 0 }, r = 0;
    for (uint32_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) s += ((int32_t)wlm_q4g_q(row, nb, b, k) - 8) * x[b].qs[k];
        float t = (wlm_f16_to_f32(wlm_q4g_d(row, nb, b)) * wlm_f16_to_f32(x[b].d)) * (float)s;
        if (b < full) a[b % 4] += t;
        else r += t;
        if (b + 1 == full) r = (a[0] + a[1]) + (a[2] + a[3]);
    }
    return r;
}

void wlm_dequantize_q4g_row(const uint8_t *row, float *y, uint32_t n) {
    uint32_t nb = n / 32;
    for (uint32_t b = 0; b < nb; b++) {
        float d = wlm_f16_to_f32(wlm_q4g_d(row, nb, b));
        for (uint32_t k = 0; k < 32; k++) y[b * 32 + k] = d * (float)((int)wlm_q4g_q(row, nb, b, k) - 8);
    }
}

/* blocks [b0, b1) of x widened to int16 in the i16eo order (grouped = 0) or
 * the i16g order, then their scales and exact sums */
static void act_i16_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1, int grouped) {
    uint32_t nb = n / 32;
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    int32_t *sum = (int32_t *)(out + (uint64_t)n * 2 + (uint64_t)nb * 4);
    for (uint32_t b = b0; b < b1; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) {
            q[grouped ? wlm_i16g_pos(b, nb, k) : b * 32 + wlm_i16eo_pos(k)] = x[b].qs[k];
            s += x[b].qs[k];
        }
        d[b] = wlm_f16_to_f32(x[b].d);
        sum[b] = s;
    }
}

void wlm_act_i16g_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) { act_i16_blocks(x, out, n, b0, b1, 1); }

void wlm_act_i16eo(const block_q8_0 *x, uint8_t *out, uint32_t n) { wlm_act_i16eo_blocks(x, out, n, 0, n / 32); }

void wlm_act_i16eo_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) { act_i16_blocks(x, out, n, b0, b1, 0); }
