// File staging: the model file's bytes gathered in one block of wasm memory
// (the model then takes the block over: wlm_model_load_inplace). A split
// GGUF's parts follow one another in the same block, each starting on a
// PART_ALIGN boundary (nextPart), and load with wlm_model_load_parts_inplace.
import { ggufHeaderProblem, badFileError } from './gguf.js';
import { tooLargeError } from '../memory64.js';

/** Most bytes reserved up front for a file whose size is only declared (see FileStaging.begin). */
export const DECLARED_FIRST_BYTES = 64 << 20;
/** Most bytes reserved up front for a vocabulary-only load (its metadata; the block grows when they are more). */
export const VOCAB_FIRST_BYTES = 4 << 20;
/** Where each part after the first starts in the block (a multiple of this). */
export const PART_ALIGN = 64;

export class FileStaging {
  /** @param {{alloc(n:number, what?:string):number, free(p:number):void, u8: Uint8Array, maxBytes: number, memory64: boolean}} heap */
  constructor(heap) {
    this.heap = heap;
    this.ptr = 0; this.cap = 0; this.len = 0; this.hint = 0;
    this.starts = [0]; this.ends = [];   // the parts: [starts[i], ends[i]) in the block (the last one ends at len)
  }

  /**
   * Reserves memory for a file of (about) `size` bytes. A `declared` size (a
   * server's Content-Length, a caller's claim) is not trusted: at most
   * DECLARED_FIRST_BYTES are reserved up front, the rest once that much has
   * really arrived, so a lying header cannot take gigabytes of memory (which
   * a wasm instance never gives back) before the first byte. `first`: that
   * up-front limit (a vocabulary-only load reads only the first megabytes,
   * and its block grows from there without taking the size as a hint).
   */
  begin(size, declared, first = DECLARED_FIRST_BYTES) {
    this.free();
    if (size > this.heap.maxBytes && !declared) {
      throw tooLargeError(size, { memory64: this.heap.memory64, reason: 'this engine was started as a wasm32 build (the size was not known when it was chosen)' });
    }
    this.hint = declared && size > 0 && first === DECLARED_FIRST_BYTES ? size : 0;
    this.cap = size > 0 ? (declared ? Math.min(size, first) : size) : 1 << 20;
    this.ptr = this.heap.alloc(this.cap);
    this.len = 0;
    this.starts = [0]; this.ends = [];
    return this.ptr;
  }

  free() {
    if (this.ptr) this.heap.free(this.ptr);
    this.ptr = 0; this.cap = 0; this.len = 0; this.hint = 0;
    this.starts = [0]; this.ends = [];
  }

  /**
   * Starts the next part of a split GGUF after the bytes written so far, on a
   * PART_ALIGN boundary; `size` (0: unknown) is reserved as begin() does:
   * exactly, or a declared one at most DECLARED_FIRST_BYTES up front.
   */
  nextPart(size, declared) {
    if (this.len === this.partStart) throw badFileError(`split GGUF part ${this.starts.length}`, 'empty file');
    this.ends.push(this.len);
    const start = Math.ceil(this.len / PART_ALIGN) * PART_ALIGN;
    this.reserve(start - this.len);
    this.heap.u8.fill(0, this.ptr + this.len, this.ptr + start);
    this.len = start;
    this.starts.push(start);
    this.hint = declared && size > 0 ? start + size : 0;
    if (size > 0) this.reserve(declared ? Math.min(size, DECLARED_FIRST_BYTES) : size);
  }

  get partStart() { return this.starts[this.starts.length - 1]; }

  /** The parts written: [{offset, length}] in the block (one for a plain file). */
  parts() {
    return this.starts.map((s, i) => ({ offset: s, length: (i < this.ends.length ? this.ends[i] : this.len) - s }));
  }

  /** Bytes of the file(s), without the padding between parts. */
  get dataLen() { return this.parts().reduce((a, p) => a + p.length, 0); }

  /** Makes room for `extra` more bytes (grows the block if the size was unknown or only declared). */
  reserve(extra) {
    const need = this.len + extra;
    if (need <= this.cap) return;
    // a file whose size was not known when the build was chosen (a stream) may outgrow its memory
    if (need > this.heap.maxBytes) {
      throw tooLargeError(need, { atLeast: true, memory64: this.heap.memory64,
        reason: "its size was not known up front (a stream without a length), so the wasm32 engine was chosen: load it with the option memory64: 'on'" });
    }
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
    if (this.len - this.partStart < 4) this.checkHead(bytes, this.starts.length > 1 ? `${name} (split part ${this.starts.length})` : name);
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
    const have = this.heap.u8.slice(this.ptr + this.partStart, this.ptr + this.len);
    const head = new Uint8Array(Math.min(4, have.byteLength + next.byteLength));
    head.set(have.subarray(0, head.byteLength));
    if (head.byteLength > have.byteLength) head.set(next.subarray(0, head.byteLength - have.byteLength), have.byteLength);
    const problem = ggufHeaderProblem(head);
    if (problem) throw badFileError(name, problem);
  }
}
