// A small streaming GGUF (v3) writer for the project's own model tools.
// Metadata values are given with their GGUF type; tensor data is produced by
// a callback per tensor so multi-gigabyte files never sit in memory whole.
import fs from 'node:fs';

export const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 };
export const GGML = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8 };
const BLOCK = { 0: [1, 4], 1: [1, 2], 2: [32, 18], 8: [32, 34] };

const enc = new TextEncoder();

class Bytes {
  constructor() { this.parts = []; this.len = 0; }
  raw(u8) { this.parts.push(u8); this.len += u8.length; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.raw(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v | 0); this.raw(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.raw(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.raw(b); }
  str(s) { const u = enc.encode(s); this.u64(u.length); this.raw(u); }
  value(type, v) {
    switch (type) {
      case T.U32: return this.u32(v);
      case T.I32: return this.i32(v);
      case T.F32: return this.f32(v);
      case T.BOOL: return this.raw(Uint8Array.of(v ? 1 : 0));
      case T.STRING: return this.str(v);
      case T.U64: return this.u64(v);
      default: throw new Error(`gguf-writer: value type ${type} not supported`);
    }
  }
  concat() { return Buffer.concat(this.parts, this.len); }
}

/** Size in bytes of a tensor of `type` with dims `ne` (ne[0] = row length). */
export function tensorBytes(type, ne) {
  const [blk, bytes] = BLOCK[type];
  const n = ne.reduce((a, b) => a * b, 1);
  if (ne[0] % blk) throw new Error(`row length ${ne[0]} is not a multiple of ${blk}`);
  return (n / blk) * bytes;
}

/**
 * Writes a GGUF file.
 * @param {string} path
 * @param {Array<{key:string,type:number,value:any,arrayType?:number}>} kv
 * @param {Array<{name:string,ne:number[],type:number,write:(emit:(u8:Uint8Array)=>void)=>void}>} tensors
 */
export function writeGGUF(path, kv, tensors, alignment = 32) {
  // each value encoded as a reader finds it after the pair's type; tensors sized from their type
  const raw = kv.map(({ key, type, value, arrayType }) => {
    const b = new Bytes();
    if (type === T.ARRAY) {
      b.u32(arrayType); b.u64(value.length);
      for (const v of value) b.value(arrayType, v);
    } else b.value(type, value);
    return { key, type, raw: b.concat() };
  });
  const sized = tensors.map((t) => ({ ...t, nbytes: tensorBytes(t.type, t.ne) }));
  writeGGUFRaw(path, { version: 3, alignment, kv: raw, tensors: sized, padEnd: false });
}

/**
 * Writes a GGUF file from metadata values already encoded (`raw`: the bytes
 * after a pair's type, as a reader finds them) and tensors of any type with
 * their byte size given; data is placed as writeGGUF does (each tensor at the
 * next `alignment` boundary, zero padding). For tools that copy tensors from
 * other GGUF files (models/gguf-split.js). `padEnd`: pad after the last
 * tensor to the alignment too.
 * @param {string} path
 * @param {{version?:number, alignment?:number, kv:Array<{key:string,type:number,raw:Uint8Array}>,
 *          tensors:Array<{name:string,ne:Array<number|bigint>,type:number,nbytes:number,write:(emit:(u8:Uint8Array)=>void)=>void}>}} d
 */
export function writeGGUFRaw(path, { version = 3, alignment = 32, kv, tensors, padEnd = true }) {
  const h = new Bytes();
  h.raw(enc.encode('GGUF')); h.u32(version); h.u64(tensors.length); h.u64(kv.length);
  for (const { key, type, raw } of kv) { h.str(key); h.u32(type); h.raw(raw); }
  let off = 0;
  const offsets = [];
  for (const t of tensors) {
    h.str(t.name); h.u32(t.ne.length);
    for (const d of t.ne) h.u64(d);
    h.u32(t.type); h.u64(off);
    offsets.push(off);
    off = Math.ceil((off + t.nbytes) / alignment) * alignment;
  }
  const head = h.concat();
  const fd = fs.openSync(path, 'w');
  try {
    fs.writeSync(fd, head);
    let pos = head.length;
    const dataStart = Math.ceil(pos / alignment) * alignment;
    const pad = (to) => { if (to > pos) { fs.writeSync(fd, Buffer.alloc(to - pos)); pos = to; } };
    tensors.forEach((t, i) => {
      pad(dataStart + offsets[i]);
      let written = 0;
      t.write((u8) => { fs.writeSync(fd, u8); written += u8.length; pos += u8.length; });
      if (written !== t.nbytes) throw new Error(`tensor ${t.name}: wrote ${written} bytes, expected ${t.nbytes}`);
    });
    if (padEnd) pad(dataStart + off);   // (llama.cpp pads the last tensor too; writeGGUF does not)
  } finally {
    fs.closeSync(fd);
  }
}
