// The closed protocol between a model's caller (web/index.js, web/scaling.js)
// and its worker (web/worker/worker.js), and the constants both sides share.
// Caller-safe: no worker-side imports.

/** GGML type ids accepted by quantize (names as `model.quantize(type)` takes them). */
export const QUANT_TYPES = Object.freeze({
  f32: 0, f16: 1, q4_0: 2, q8_0: 8, q4_1: 3, q5_0: 6, q5_1: 7,
  q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14, q4_k_m: 1000, q5_k_m: 1001,
});
