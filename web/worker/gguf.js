// GGUF as JS sees it: the header check of a model file's first bytes and the
// decoding of raw metadata values (the engine hands out pointers to them).
import { WasmlmError } from '../errors.js';
import { decodeUtf8 } from './text.js';

// GGUF metadata value types
const GT = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 };
export const GGUF_TYPE_NAMES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'];
const FIXED_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
/** Arrays longer than this are summarised in `info` as {arrayOf, count, head}. */
export const ARRAY_SUMMARY_LIMIT = 16;
const ARRAY_HEAD = 8;

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32

/**
 * Why the first bytes of a model file are not a GGUF header, or null when
 * they start as one. `atEnd`: these are all the bytes there are.
 */
export function ggufHeaderProblem(bytes, atEnd = false) {
  if (bytes.byteLength >= 4) {
    const magic = (bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (bytes[3] << 24)) >>> 0;
    return magic === GGUF_MAGIC ? null : `not a GGUF file (magic 0x${magic.toString(16)}, a GGUF file starts with "GGUF")`;
  }
  if (!atEnd) return null;
  return bytes.byteLength === 0 ? 'not a GGUF file: empty file' : `not a GGUF file: only ${bytes.byteLength} bytes`;
}

/** A BAD_FILE error for a model file (or stream) `name` whose header is wrong. */
export function badFileError(name, problem) {
  // status: the C engine's WLM_ERR_FORMAT, which the same bytes would get from it
  return new WasmlmError('BAD_FILE', `${name}: ${problem}`, { status: 2, file: name });
}

/** The shortest decimal that rounds to the same float32 (1e-5, not 0.000009999999747378752). */
export function shortF32(v) {
  if (!Number.isFinite(v) || v === 0) return v;
  for (let p = 1; p <= 9; p++) {
    const d = Number(v.toPrecision(p));
    if (Math.fround(d) === v) return d;
  }
  return v;
}

function bigToNum(b) {
  return (b <= BigInt(Number.MAX_SAFE_INTEGER) && b >= BigInt(Number.MIN_SAFE_INTEGER)) ? Number(b) : b;
}

/**
 * Decodes one raw GGUF metadata value of `type` at `off` in DataView `dv`
 * (bounded by `end`). Returns {value, next}. Arrays longer than
 * ARRAY_SUMMARY_LIMIT are summarised; the walk stops after the head.
 */
export function decodeGgufValue(dv, off, type, end = dv.byteLength) {
  const need = (n) => { if (off + n > end) throw new RangeError('metadata value runs past its end'); };
  switch (type) {
    case GT.U8: need(1); return { value: dv.getUint8(off), next: off + 1 };
    case GT.I8: need(1); return { value: dv.getInt8(off), next: off + 1 };
    case GT.U16: need(2); return { value: dv.getUint16(off, true), next: off + 2 };
    case GT.I16: need(2); return { value: dv.getInt16(off, true), next: off + 2 };
    case GT.U32: need(4); return { value: dv.getUint32(off, true), next: off + 4 };
    case GT.I32: need(4); return { value: dv.getInt32(off, true), next: off + 4 };
    case GT.F32: need(4); return { value: shortF32(dv.getFloat32(off, true)), next: off + 4 };
    case GT.BOOL: need(1); return { value: dv.getUint8(off) !== 0, next: off + 1 };
    case GT.U64: need(8); return { value: bigToNum(dv.getBigUint64(off, true)), next: off + 8 };
    case GT.I64: need(8); return { value: bigToNum(dv.getBigInt64(off, true)), next: off + 8 };
    case GT.F64: need(8); return { value: dv.getFloat64(off, true), next: off + 8 };
    case GT.STRING: {
      need(8);
      const n = Number(dv.getBigUint64(off, true));
      off += 8; need(n);
      const s = decodeUtf8(new Uint8Array(dv.buffer, dv.byteOffset + off, n));
      return { value: s, next: off + n };
    }
    case GT.ARRAY: {
      need(12);
      const et = dv.getUint32(off, true);            // GGUF array header: element type, then count
      off += 4;
      const count = Number(dv.getBigUint64(off, true));
      off += 8;
      const summarise = count > ARRAY_SUMMARY_LIMIT;
      const take = summarise ? ARRAY_HEAD : count;
      const vals = [];
      for (let i = 0; i < take; i++) {
        const r = decodeGgufValue(dv, off, et, end);
        vals.push(r.value); off = r.next;
      }
      if (!summarise) return { value: vals, next: off };
      // skip the rest cheaply when elements have a fixed size
      const fs = FIXED_SIZE[et];
      const next = fs ? off + (count - take) * fs : -1;
      return { value: { arrayOf: GGUF_TYPE_NAMES[et] || String(et), count, head: vals }, next };
    }
    default: throw new RangeError('unknown GGUF value type ' + type);
  }
}
