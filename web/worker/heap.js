// The engine's wasm memory as JS uses it: typed-array views (re-created
// whenever a call grew the memory), blocks from the engine's allocator, the
// scratch block (its layout: SCRATCH in ./abi.js) and the C error it carries.
// Struct layouts come from the build's own table (this.abi: ABI32 or ABI64),
// since a struct holding a pointer has another layout in wasm64.
//
// Addresses are Numbers in both builds: wasm32 ones below 2^32, memory64
// (wasm64) ones up to 16 GiB (their exports are wrapped: web/memory64.js).
// So an address is never narrowed with `>>> 0` or `>>> 2`, which wrap at
// 2^32: addr() reads one an export returned, word() indexes the 32-bit views.
import { EngineError } from '../errors.js';
import { abiFor } from './abi.js';
import { decodeUtf8 } from './text.js';
import { WASM32_MAX_BYTES, WASM64_MAX_BYTES } from '../memory64.js';

/** An address an export returned: a wasm32 i32 is negative from 2 GiB up; memory64 ones are Numbers already. */
export const addr = (p) => (p < 0 ? p + 4294967296 : p);
/** The index of the 4-byte-aligned address `p` in the Int32Array / Float32Array views. */
export const word = (p) => p / 4;

export const STATUS_NAMES = [
  'WLM_OK', 'WLM_ERR_ARG', 'WLM_ERR_FORMAT', 'WLM_ERR_TRUNCATED', 'WLM_ERR_UNSUPPORTED',
  'WLM_ERR_NOMEM', 'WLM_ERR_CONTEXT_FULL', 'WLM_ERR_STATE',
];
export const STATUS_CONTEXT_FULL = 6;

/** The one shape of every out-of-memory message (as the C side's wlm_fail_nomem). */
export function nomemMessage(what, bytes, inUse, limit) {
  const msg = `${what} needs ${bytes} more bytes of memory (${inUse} in use, limit ${limit})`;
  // under the limit the cause is elsewhere: the host would not grow the memory
  return bytes + inUse > limit ? msg : msg + ' and the memory could not grow';
}

export class WasmHeap {
  /** @param {boolean} memory64 a wasm64 build: 8-byte pointers, memory up to WASM64_MAX_BYTES */
  constructor(exports, memory, memory64 = false) {
    this.x = exports;
    this.memory = memory;
    this.memory64 = memory64;
    /** the most memory this build addresses */
    this.maxBytes = memory64 ? WASM64_MAX_BYTES : WASM32_MAX_BYTES;
    /** the struct layouts, readers and writers of this build (./abi.js) */
    this.abi = abiFor(memory64);
    this.buf = null;
    this.scratch = this.alloc(this.abi.SCRATCH.size);
  }

  views() {
    if (this.buf !== this.memory.buffer) {
      this.buf = this.memory.buffer;
      this.views_ = { u8: new Uint8Array(this.buf), dv: new DataView(this.buf), i32: new Int32Array(this.buf), f32: new Float32Array(this.buf) };
    }
    return this.views_;
  }
  get u8() { return this.views().u8; }
  get dv() { return this.views().dv; }
  get i32() { return this.views().i32; }
  get f32() { return this.views().f32; }

  alloc(bytes, what = 'an engine buffer') {
    const p = this.x.wlm_sys_alloc(BigInt(Math.max(1, bytes)));
    if (!p) throw new EngineError(nomemMessage(what, bytes, Number(this.x.wlm_sys_in_use()), Number(this.x.wlm_sys_limit())), 5);
    return addr(p);
  }
  /** The pointer stored at `at` (a C out-parameter: 4 bytes in wasm32, 8 in wasm64). */
  getPtr(at) { return this.memory64 ? Number(this.dv.getBigUint64(at, true)) : this.dv.getUint32(at, true); }
  /** Stores pointer `p` at `at` (4 or 8 bytes, as getPtr reads it). */
  setPtr(at, p) { if (this.memory64) this.dv.setBigUint64(at, BigInt(p), true); else this.dv.setUint32(at, p, true); }
  /** Bytes of a pointer in this build. */
  get ptrBytes() { return this.memory64 ? 8 : 4; }
  free(p) { if (p) this.x.wlm_sys_free(p); }
  setMemoryLimit(bytes) { this.x.wlm_sys_set_limit(BigInt(bytes)); }
  memoryInUse() { return Number(this.x.wlm_sys_in_use()); }

  /** Address of a scratch field (SCRATCH in ./abi.js). */
  at(field) { return this.scratch + this.abi.SCRATCH[field]; }

  /** The message of the last failed call (the scratch wlm_err). */
  errorMessage(status) {
    const { ERR } = this.abi, u8 = this.u8, p = this.at('err') + ERR.msg;
    let e = p; while (e < p + ERR.msgBytes && u8[e] !== 0) e++;
    return decodeUtf8(u8.subarray(p, e)) || STATUS_NAMES[status] || 'error ' + status;
  }
  /** Throws the engine error of a non-zero status. */
  check(status, what) {
    if (status !== 0) throw new EngineError((what ? what + ': ' : '') + this.errorMessage(status), status);
  }
  clearError() { const { ERR } = this.abi; this.dv.setUint32(this.at('err') + ERR.code, 0, true); this.u8[this.at('err') + ERR.msg] = 0; }
  cstr(p, len) { return decodeUtf8(this.u8.subarray(p, p + len)); }
  /** A NUL-terminated string at `p` (at most `cap` bytes). */
  cstrz(p, cap = Infinity) {
    const u8 = this.u8; let e = p; while (e < p + cap && u8[e] !== 0) e++;
    return decodeUtf8(u8.subarray(p, e));
  }
}
