// The engine's wasm memory as JS uses it: typed-array views (re-created
// whenever a call grew the memory), blocks from the engine's allocator, the
// scratch block (its layout: SCRATCH in ./abi.js) and the C error it carries.
import { EngineError } from '../errors.js';
import { ERR, SCRATCH } from './abi.js';
import { decodeUtf8 } from './text.js';

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
  constructor(exports, memory) {
    this.x = exports;
    this.memory = memory;
    this.buf = null;
    this.scratch = this.alloc(SCRATCH.size);
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
    return p >>> 0;
  }
  free(p) { if (p) this.x.wlm_sys_free(p); }
  setMemoryLimit(bytes) { this.x.wlm_sys_set_limit(BigInt(bytes)); }
  memoryInUse() { return Number(this.x.wlm_sys_in_use()); }

  /** Address of a scratch field (SCRATCH in ./abi.js). */
  at(field) { return this.scratch + SCRATCH[field]; }

  /** The message of the last failed call (the scratch wlm_err). */
  errorMessage(status) {
    const u8 = this.u8, p = this.at('err') + ERR.msg;
    let e = p; while (e < p + ERR.msgBytes && u8[e] !== 0) e++;
    return decodeUtf8(u8.subarray(p, e)) || STATUS_NAMES[status] || 'error ' + status;
  }
  /** Throws the engine error of a non-zero status. */
  check(status, what) {
    if (status !== 0) throw new EngineError((what ? what + ': ' : '') + this.errorMessage(status), status);
  }
  clearError() { this.dv.setUint32(this.at('err') + ERR.code, 0, true); this.u8[this.at('err') + ERR.msg] = 0; }
  cstr(p, len) { return decodeUtf8(this.u8.subarray(p, p + len)); }
  /** A NUL-terminated string at `p` (at most `cap` bytes). */
  cstrz(p, cap = Infinity) {
    const u8 = this.u8; let e = p; while (e < p + cap && u8[e] !== 0) e++;
    return decodeUtf8(u8.subarray(p, e));
  }
}
