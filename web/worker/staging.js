// File staging: the model file's bytes gathered in one block of wasm memory
// (the model then takes the block over: wlm_model_load_inplace).
import { ggufHeaderProblem, badFileError } from './gguf.js';

/** Most bytes reserved up front for a file whose size is only declared (see FileStaging.begin). */
export const DECLARED_FIRST_BYTES = 64 << 20;

export class FileStaging {
  /** @param {{alloc(n:number, what?:string):number, free(p:number):void, u8: Uint8Array}} heap */
  constructor(heap) {
    this.heap = heap;
    this.ptr = 0; this.cap = 0; this.len = 0; this.hint = 0;
  }

  /**
   * Reserves memory for a file of (about) `size` bytes. A `declared` size (a
   * server's Content-Length, a caller's claim) is not trusted: at most
   * DECLARED_FIRST_BYTES are reserved up front, the rest once that much has
   * really arrived, so a lying header cannot take gigabytes of memory (which
   * a wasm instance never gives back) before the first byte.
   */
  begin(size, declared) {
    this.free();
    this.hint = declared && size > 0 ? size : 0;
    this.cap = size > 0 ? (declared ? Math.min(size, DECLARED_FIRST_BYTES) : size) : 1 << 20;
    this.ptr = this.heap.alloc(this.cap);
    this.len = 0;
    return this.ptr;
  }

  free() {
    if (this.ptr) this.heap.free(this.ptr);
    this.ptr = 0; this.cap = 0; this.len = 0; this.hint = 0;
  }

  /** Makes room for `extra` more bytes (grows the block if the size was unknown or only declared). */
  reserve(extra) {
    const need = this.len + extra;
    if (need <= this.cap) return;
    // a declared size that the bytes so far still fit is taken in one step (one copy)
    const cap = need <= this.hint ? this.hint : Math.max(need, Math.ceil(this.cap * 1.5), 1 << 20);
    const p = this.heap.alloc(cap);
    this.heap.u8.copyWithin(p, this.ptr, this.ptr + this.len);
    this.heap.free(this.ptr);
    this.ptr = p; this.cap = cap;
  }

  /** Copies a chunk after the bytes already written; the first ones must
   * start a GGUF header (checked before the block grows). */
  write(bytes, name) {
    if (this.len < 4) this.checkHead(bytes, name);
    this.reserve(bytes.byteLength);
    this.heap.u8.set(bytes, this.ptr + this.len);
    this.len += bytes.byteLength;
  }

  /** A view of `n` writable bytes at the write position (for reading files straight in). */
  writeView(n) {
    this.reserve(n);
    return this.heap.u8.subarray(this.ptr + this.len, this.ptr + this.len + n);
  }

  advance(n) { this.len += n; }

  /** Throws BAD_FILE when the bytes written so far plus `next` cannot start a GGUF file. */
  checkHead(next, name) {
    const have = this.heap.u8.slice(this.ptr, this.ptr + this.len);
    const head = new Uint8Array(Math.min(4, have.byteLength + next.byteLength));
    head.set(have.subarray(0, head.byteLength));
    if (head.byteLength > have.byteLength) head.set(next.subarray(0, head.byteLength - have.byteLength), have.byteLength);
    const problem = ggufHeaderProblem(head);
    if (problem) throw badFileError(name, problem);
  }
}
