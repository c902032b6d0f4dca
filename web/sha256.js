// Incremental SHA-256 (FIPS 180-4) for browsers, where SubtleCrypto can only
// hash a whole buffer at once. Node uses node:crypto instead.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

const rotr = (x, n) => (x >>> n) | (x << (32 - n));

export class Sha256 {
  constructor() {
    this.h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Uint32Array(64);
    this.block = new Uint8Array(64);
    this.nBlock = 0;
    this.length = 0; // bytes hashed so far
    this.done = false;
  }

  _compress(b, off) {
    const w = this.w, h = this.h;
    for (let i = 0; i < 16; i++) {
      const j = off + 4 * i;
      w[i] = (b[j] << 24) | (b[j + 1] << 16) | (b[j + 2] << 8) | b[j + 3];
    }
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15], c = w[i - 2];
      const s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3);
      const s1 = rotr(c, 17) ^ rotr(c, 19) ^ (c >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let A = h[0], B = h[1], C = h[2], D = h[3], E = h[4], F = h[5], G = h[6], H = h[7];
    for (let i = 0; i < 64; i++) {
      const S1 = rotr(E, 6) ^ rotr(E, 11) ^ rotr(E, 25);
      const ch = (E & F) ^ (~E & G);
      const t1 = (H + S1 + ch + K[i] + w[i]) | 0;
      const S0 = rotr(A, 2) ^ rotr(A, 13) ^ rotr(A, 22);
      const maj = (A & B) ^ (A & C) ^ (B & C);
      const t2 = (S0 + maj) | 0;
      H = G; G = F; F = E; E = (D + t1) | 0; D = C; C = B; B = A; A = (t1 + t2) | 0;
    }
    h[0] += A; h[1] += B; h[2] += C; h[3] += D; h[4] += E; h[5] += F; h[6] += G; h[7] += H;
  }

  /** @param {Uint8Array} data */
  update(data) {
    if (this.done) throw new Error('sha256: update after digest');
    let i = 0;
    const n = data.length;
    this.length += n;
    if (this.nBlock > 0) {
      const take = Math.min(64 - this.nBlock, n);
      this.block.set(data.subarray(0, take), this.nBlock);
      this.nBlock += take; i = take;
      if (this.nBlock < 64) return this;
      this._compress(this.block, 0);
      this.nBlock = 0;
    }
    for (; i + 64 <= n; i += 64) this._compress(data, i);
    if (i < n) { this.block.set(data.subarray(i), 0); this.nBlock = n - i; }
    return this;
  }

  /** @returns {string} lowercase hex digest */
  hex() {
    if (!this.done) {
      const bits = this.length * 8;
      const pad = new Uint8Array(((this.nBlock + 9 + 63) >> 6) * 64 - this.nBlock);
      pad[0] = 0x80;
      const dv = new DataView(pad.buffer);
      dv.setUint32(pad.length - 8, Math.floor(bits / 0x100000000), false);
      dv.setUint32(pad.length - 4, bits >>> 0, false);
      const len = this.length;
      this.update(pad);
      this.length = len;
      this.done = true;
    }
    return Array.from(this.h, (x) => x.toString(16).padStart(8, '0')).join('');
  }
}
