#!/usr/bin/env node
// Hostile GGUF corpus: small model files that are each broken in one way a
// file from the web could be (overflowing sizes and offsets, absurd
// dimensions, duplicate names, overlapping or missing tensor data, strings and
// arrays longer than the file, wrong metadata types, vocabulary mismatches,
// special token ids out of range, ...). Every case records the status the
// engine must return and a piece of the message that names the problem.
//
//   node tools/make-hostile.mjs [OUTDIR]     (default build/hostile)
//
// writes OUTDIR/<case>.gguf and OUTDIR/manifest.tsv
// (file <TAB> status code <TAB> message substring <TAB> what it tests), read
// by tests/c/test_hostile.c (native, wasm, ASan) and tests/js/hostile.test.mjs
// (loadModel in the wasm build). Cases are built by editing a parsed
// description of a valid tiny model (models/make-model.js) and serializing it
// again, so each file differs from a loadable one in exactly the stated way.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../models/make-model.js';
import { T } from '../models/gguf-writer.js';

export const STATUS = { OK: 0, ARG: 1, FORMAT: 2, TRUNCATED: 3, UNSUPPORTED: 4, NOMEM: 5 };
const enc = new TextEncoder();
const U64_MAX = (1n << 64n) - 1n;

// ---- encoding ----------------------------------------------------------------

class Buf {
  constructor() { this.parts = []; this.len = 0; }
  raw(u8) { this.parts.push(u8); this.len += u8.length; return this; }
  u8(v) { return this.raw(Uint8Array.of(v & 255)); }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(Number(BigInt.asUintN(32, BigInt(v)))); return this.raw(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v | 0); return this.raw(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v))); return this.raw(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); return this.raw(b); }
  f64(v) { const b = Buffer.alloc(8); b.writeDoubleLE(v); return this.raw(b); }
  str(s) { const u = typeof s === 'string' ? enc.encode(s) : s; this.u64(u.length); return this.raw(u); }
  bytes() { return new Uint8Array(Buffer.concat(this.parts, this.len)); }
}

/** Encodes a value (what follows the type field) of GGUF type `type`. */
export function encodeValue(type, v, arrayType) {
  const b = new Buf();
  const one = (t, x) => {
    switch (t) {
      case T.U8: case T.I8: case T.BOOL: return b.u8(x);
      case T.U16: case T.I16: { const z = Buffer.alloc(2); z.writeUInt16LE(x & 0xffff); return b.raw(z); }
      case T.U32: return b.u32(x);
      case T.I32: return b.i32(x);
      case T.F32: return b.f32(x);
      case T.STRING: return b.str(x);
      case T.U64: case T.I64: return b.u64(x);
      case T.F64: return b.f64(x);
      default: throw new Error(`encodeValue: type ${t}`);
    }
  };
  if (type === T.ARRAY) { b.u32(arrayType); b.u64(v.length); for (const x of v) one(arrayType, x); }
  else one(type, v);
  return b.bytes();
}

// ---- a parsed, editable GGUF description ------------------------------------------

/** Parses a valid GGUF file into {version, kv:[{key,type,raw}], tensors:[{name,ne,type,data}], alignment}. */
export function parseGGUF(u8) {
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  let p = 4;
  const u32 = () => { const v = dv.getUint32(p, true); p += 4; return v; };
  const u64 = () => { const v = dv.getBigUint64(p, true); p += 8; return v; };
  const str = () => { const n = Number(u64()); const s = Buffer.from(u8.subarray(p, p + n)).toString('utf8'); p += n; return s; };
  const size = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
  const skip = (t) => {
    if (t === T.STRING) { p += 8 + Number(dv.getBigUint64(p, true)); return; }
    if (t === T.ARRAY) { const et = u32(), n = Number(u64()); for (let i = 0; i < n; i++) skip(et); return; }
    p += size[t];
  };
  const version = u32(), nt = Number(u64()), nkv = Number(u64());
  const kv = [], tensors = [];
  for (let i = 0; i < nkv; i++) {
    const key = str(), type = u32(), s = p; skip(type);
    kv.push({ key, type, raw: u8.slice(s, p) });
  }
  const al = kv.find((e) => e.key === 'general.alignment');
  const alignment = al ? new DataView(al.raw.buffer).getUint32(0, true) : 32;
  for (let i = 0; i < nt; i++) {
    const name = str(), nd = u32(), ne = [];
    for (let d = 0; d < nd; d++) ne.push(u64());
    const type = u32(), offset = u64();
    tensors.push({ name, ne, type, offset });
  }
  const start = Math.ceil(p / alignment) * alignment;
  const sorted = [...tensors].sort((a, b) => (a.offset < b.offset ? -1 : 1));
  sorted.forEach((t, i) => {
    const end = i + 1 < sorted.length ? Number(sorted[i + 1].offset) : u8.length - start;
    t.data = u8.slice(start + Number(t.offset), start + end);
  });
  for (const t of tensors) delete t.offset;
  return { version, kv, tensors, alignment };
}

/** Serializes a description. Optional fields: magic, nTensors/nKv (override
 * the counts), per tensor nDims (override), offset (BigInt: recorded as is,
 * data not written), per kv rawKey (bytes of the key string encoding). */
export function serializeGGUF(d) {
  const b = new Buf();
  b.raw(d.magic || enc.encode('GGUF'));
  b.u32(d.version ?? 3);
  b.u64(d.nTensors ?? d.tensors.length);
  b.u64(d.nKv ?? d.kv.length);
  for (const e of d.kv) {
    if (e.rawKey) b.raw(e.rawKey); else b.str(e.key);
    b.u32(e.type); b.raw(e.raw);
  }
  const a = d.alignment || 32;
  let next = 0;
  const place = [];
  for (const t of d.tensors) {
    b.str(t.name);
    const nd = t.nDims ?? t.ne.length;
    b.u32(nd);
    for (let i = 0; i < Math.min(nd, t.ne.length); i++) b.u64(t.ne[i]);
    b.u32(t.type);
    if (t.offset != null) { b.u64(t.offset); place.push(null); }
    else { b.u64(next); place.push(next); next = Math.ceil((next + t.data.length) / a) * a; }
  }
  const head = b.bytes();
  const start = Math.ceil(head.length / a) * a;
  const out = new Uint8Array(start + next);
  out.set(head);
  d.tensors.forEach((t, i) => { if (place[i] != null) out.set(t.data, start + place[i]); });
  return out;
}

const clone = (d) => ({ ...d, kv: d.kv.map((e) => ({ ...e })), tensors: d.tensors.map((t) => ({ ...t, ne: [...t.ne] })) });
const kvIndex = (d, key) => { const i = d.kv.findIndex((e) => e.key === key); if (i < 0) throw new Error(`no key ${key}`); return i; };
const setKv = (d, key, type, v, arrayType) => {
  const raw = encodeValue(type, v, arrayType), i = d.kv.findIndex((e) => e.key === key);
  if (i < 0) d.kv.push({ key, type, raw }); else d.kv[i] = { key, type, raw };
};
const tensor = (d, name) => { const t = d.tensors.find((x) => x.name === name); if (!t) throw new Error(`no tensor ${name}`); return t; };
const arrayOf = (d, key) => { // decoded string array
  const e = d.kv[kvIndex(d, key)], dv = new DataView(e.raw.buffer, e.raw.byteOffset);
  const n = Number(dv.getBigUint64(4, true)), out = []; let p = 12;
  for (let i = 0; i < n; i++) { const l = Number(dv.getBigUint64(p, true)); out.push(Buffer.from(e.raw.subarray(p + 8, p + 8 + l)).toString('utf8')); p += 8 + l; }
  return out;
};

// ---- base models -------------------------------------------------------------

export const MICRO = { dim: 8, layers: 1, heads: 2, kvHeads: 1, ffn: 16, ctx: 64, vocab: 320 };

/** Valid tiny model files (bytes) of each vocabulary kind. */
export function baseModels() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wlm-hostile-'));
  try {
    const spm = fs.readFileSync(makeModel(path.join(dir, 'spm.gguf'), MICRO, 'f32', 7, { arch: 'llama' }));
    const bpe = fs.readFileSync(makeModel(path.join(dir, 'bpe.gguf'), MICRO, 'f32', 7, { arch: 'llama3' }));
    const qwen = fs.readFileSync(makeModel(path.join(dir, 'qwen.gguf'), MICRO, 'f32', 7, { arch: 'qwen2' }));
    return { spm: new Uint8Array(spm), bpe: new Uint8Array(bpe), qwen: new Uint8Array(qwen) };
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

// ---- the cases -------------------------------------------------------------------

/**
 * Every hostile case: {name, bytes, status, message, what}. `message` is a
 * substring the engine's error must contain (status OK: the file must load).
 */
export function hostileCases() {
  const base = baseModels();
  const spm = parseGGUF(base.spm), bpe = parseGGUF(base.bpe);
  const nVocab = arrayOf(spm, 'tokenizer.ggml.tokens').length;
  const cases = [];
  const add = (name, what, status, message, d, post) => {
    let bytes = serializeGGUF(d);
    if (post) bytes = post(bytes);
    cases.push({ name, what, status, message, bytes });
  };
  const edit = (src, f) => { const d = clone(src); f(d); return d; };
  const emb = 'token_embd.weight', last = (d) => d.tensors[d.tensors.length - 1];

  add('valid-spm', 'the unmodified SentencePiece base model loads', STATUS.OK, '', spm);
  add('valid-bpe', 'the unmodified byte-level BPE base model loads', STATUS.OK, '', bpe);

  // header
  add('empty', 'a zero-byte file', STATUS.FORMAT, 'not a GGUF file: empty file', spm, () => new Uint8Array(0));
  add('bad-magic', 'wrong magic', STATUS.FORMAT, 'not a GGUF file (magic 0x', edit(spm, (d) => { d.magic = enc.encode('GGML'); }));
  add('version-1', 'GGUF v1', STATUS.UNSUPPORTED, 'GGUF version 1 is not supported', edit(spm, (d) => { d.version = 1; }));
  add('version-huge', 'version 2^32-1', STATUS.UNSUPPORTED, 'unsupported GGUF version 4294967295', edit(spm, (d) => { d.version = 0xffffffff; }));
  add('header-cut', 'file ends inside the header', STATUS.TRUNCATED, 'truncated: GGUF header needs 24 bytes', spm, (b) => b.subarray(0, 20));

  // counts overflowing 32 and 64 bits
  add('tensor-count-u64max', 'tensor count 2^64-1', STATUS.FORMAT, 'absurd tensor count 18446744073709551615', edit(spm, (d) => { d.nTensors = U64_MAX; }));
  add('kv-count-2p32', 'metadata count 2^32 + number of pairs (wraps to the real count in 32 bits)', STATUS.FORMAT,
    `absurd metadata count ${(1n << 32n) + BigInt(spm.kv.length)}`, edit(spm, (d) => { d.nKv = (1n << 32n) + BigInt(d.kv.length); }));
  add('tensor-count-plausible', 'a plausible tensor count the file cannot hold', STATUS.TRUNCATED, 'truncated: 100000 tensor infos',
    edit(spm, (d) => { d.nTensors = 100000; }));

  // tensor infos
  add('ndims-5', 'a tensor with 5 dimensions', STATUS.FORMAT, `tensor ${emb} has 5 dimensions (1 to 4 allowed)`,
    edit(spm, (d) => { const t = tensor(d, emb); t.ne.push(1n, 1n, 1n); t.nDims = 5; }));
  add('ndims-u32max', 'a tensor with 2^32-1 dimensions', STATUS.FORMAT, `tensor ${emb} has 4294967295 dimensions`,
    edit(spm, (d) => { tensor(d, emb).nDims = 0xffffffff; }));
  add('ndims-0', 'a tensor with no dimension', STATUS.FORMAT, `tensor ${emb} has 0 dimensions`, edit(spm, (d) => { tensor(d, emb).nDims = 0; }));
  add('dim-zero', 'a zero dimension', STATUS.FORMAT, `tensor ${emb} has absurd dimension 0`, edit(spm, (d) => { tensor(d, emb).ne[1] = 0n; }));
  add('dim-huge', 'a dimension of 2^63', STATUS.FORMAT, `tensor ${emb} has absurd dimension 9223372036854775808`,
    edit(spm, (d) => { tensor(d, emb).ne[1] = 1n << 63n; }));
  add('elements-overflow-64', 'four dimensions of 2^32 (element count overflows 64 bits)', STATUS.FORMAT, `tensor ${emb} has too many elements`,
    edit(spm, (d) => { const t = tensor(d, emb); t.ne = [1n << 32n, 1n << 32n, 1n << 32n, 1n << 32n]; }));
  add('bytes-overflow-32', 'a tensor of 2^32 + 8 elements: its byte size overflows 32 bits', STATUS.TRUNCATED,
    'data (17179869216 bytes', edit(spm, (d) => { const t = tensor(d, 'output_norm.weight'); t.ne = [8n, (1n << 29n) + 1n]; }));
  add('unknown-tensor-type', 'tensor type 200', STATUS.UNSUPPORTED, `unknown tensor type 200 in ${emb}`, edit(spm, (d) => { tensor(d, emb).type = 200; }));
  add('tensor-name-huge', 'a tensor name longer than the file', STATUS.TRUNCATED, 'tensor name of length 1099511627776',
    edit(spm, (d) => { d.tensors[0].name = ''; }), (b) => patchNameLength(b, spm, 0, 1n << 40n));

  // offsets
  add('offset-u64-wrap', 'offset + size wraps 64 bits', STATUS.TRUNCATED, 'at offset 18446744073709551584',
    edit(spm, (d) => { last(d).offset = U64_MAX - 31n; }));
  add('offset-2p32', 'offset 2^32 (0 in 32 bits)', STATUS.TRUNCATED, 'at offset 4294967296', edit(spm, (d) => { last(d).offset = 1n << 32n; }));
  add('offset-misaligned', 'offset not a multiple of the alignment', STATUS.FORMAT, 'data offset 4 is not aligned to 32',
    edit(spm, (d) => { last(d).offset = 4n; }));
  add('tensors-overlap', 'two tensors share their data bytes', STATUS.FORMAT, 'overlap',
    edit(spm, (d) => { tensor(d, 'blk.0.ffn_norm.weight').offset = 0n; }));
  add('data-past-eof', 'the file ends inside the last tensor\'s data', STATUS.TRUNCATED, 'runs past the end of the file', spm,
    (b) => b.subarray(0, b.length - 16));
  add('alignment-bad', 'general.alignment 48', STATUS.FORMAT, 'general.alignment 48 is not a power of two',
    edit(spm, (d) => setKv(d, 'general.alignment', T.U32, 48)));

  // names and keys
  add('duplicate-tensor', 'two tensors with one name', STATUS.FORMAT, "duplicate tensor name 'blk.0.attn_q.weight'",
    edit(spm, (d) => { tensor(d, 'blk.0.attn_k.weight').name = 'blk.0.attn_q.weight'; }));
  add('duplicate-key', 'a metadata key twice', STATUS.FORMAT, "duplicate metadata key 'llama.block_count'",
    edit(spm, (d) => { d.kv.push({ key: 'llama.block_count', type: T.U32, raw: encodeValue(T.U32, 1) }); }));
  add('key-empty', 'an empty metadata key', STATUS.FORMAT, 'has bad length 0',
    edit(spm, (d) => { d.kv.push({ key: '', type: T.U32, raw: encodeValue(T.U32, 1) }); }));

  // strings and arrays longer than the file, nesting
  add('string-longer-than-file', 'a string value of length 2^40', STATUS.TRUNCATED, 'metadata string of length 1099511627776',
    edit(spm, (d) => { const b = new Buf(); b.u64(1n << 40n); b.raw(enc.encode('abc')); d.kv.splice(1, 0, { key: 'test.str', type: T.STRING, raw: b.bytes() }); }));
  add('string-len-u64max', 'a string value of length 2^64-1', STATUS.TRUNCATED, 'metadata string of length 18446744073709551615',
    edit(spm, (d) => { const b = new Buf(); b.u64(U64_MAX); d.kv.splice(1, 0, { key: 'test.str', type: T.STRING, raw: b.bytes() }); }));
  add('key-longer-than-file', 'a metadata key of length 2^63', STATUS.TRUNCATED, 'metadata key of length 9223372036854775808',
    edit(spm, (d) => { const b = new Buf(); b.u64(1n << 63n); d.kv.splice(1, 0, { key: 'x', rawKey: b.bytes(), type: T.U32, raw: encodeValue(T.U32, 0) }); }));
  add('array-longer-than-file', 'a u32 array of 2^62 items', STATUS.TRUNCATED, "metadata 'test.arr' array of 4611686018427387904 u32",
    edit(spm, (d) => { const b = new Buf(); b.u32(T.U32); b.u64(1n << 62n); b.u32(1); d.kv.splice(1, 0, { key: 'test.arr', type: T.ARRAY, raw: b.bytes() }); }));
  add('array-bytes-overflow', 'a u64 array whose byte size (n * 8) overflows 64 bits', STATUS.TRUNCATED, "metadata 'test.arr' array of 2305843009213693953 u64",
    edit(spm, (d) => { const b = new Buf(); b.u32(T.U64); b.u64((1n << 61n) + 1n); d.kv.splice(1, 0, { key: 'test.arr', type: T.ARRAY, raw: b.bytes() }); }));
  add('string-array-longer-than-file', 'a string array of 2^32 items', STATUS.TRUNCATED, "metadata 'test.arr' array of 4294967296 items",
    edit(spm, (d) => { const b = new Buf(); b.u32(T.STRING); b.u64(1n << 32n); b.str('x'); d.kv.splice(1, 0, { key: 'test.arr', type: T.ARRAY, raw: b.bytes() }); }));
  add('arrays-nested-deep', 'arrays nested 8 deep', STATUS.FORMAT, "metadata 'test.arr': arrays nested deeper than",
    edit(spm, (d) => { const b = new Buf(); for (let i = 0; i < 7; i++) { b.u32(T.ARRAY); b.u64(1); } b.u32(T.U8); b.u64(1); b.u8(1); d.kv.push({ key: 'test.arr', type: T.ARRAY, raw: b.bytes() }); }));
  add('tokens-nested-array', 'tokenizer.ggml.tokens is an array of arrays', STATUS.FORMAT, 'tokenizer.ggml.tokens: expected an array of type 8, found elements of type 9',
    edit(spm, (d) => { const b = new Buf(); b.u32(T.ARRAY); b.u64(1); b.u32(T.STRING); b.u64(1); b.str('a'); d.kv[kvIndex(d, 'tokenizer.ggml.tokens')].raw = b.bytes(); }));
  add('value-type-unknown', 'a value of type 13', STATUS.FORMAT, "metadata 'test.weird': unknown value type 13",
    edit(spm, (d) => { d.kv.splice(1, 0, { key: 'test.weird', type: 13, raw: encodeValue(T.U32, 0) }); }));

  // wrong value types for known keys
  add('type-block-count-string', 'llama.block_count as a string', STATUS.FORMAT, "metadata 'llama.block_count' has type string, expected an unsigned integer",
    edit(spm, (d) => setKv(d, 'llama.block_count', T.STRING, '1')));
  add('type-eps-u32', 'layer_norm_rms_epsilon as u32', STATUS.FORMAT, "metadata 'llama.attention.layer_norm_rms_epsilon' has type u32, expected f32",
    edit(spm, (d) => setKv(d, 'llama.attention.layer_norm_rms_epsilon', T.U32, 1)));
  add('type-arch-u32', 'general.architecture as u32', STATUS.FORMAT, "metadata 'general.architecture' has type u32, expected string",
    edit(spm, (d) => setKv(d, 'general.architecture', T.U32, 7)));
  add('type-tokens-u32', 'tokenizer.ggml.tokens as a u32 array', STATUS.FORMAT, 'tokenizer.ggml.tokens: expected an array of type 8, found elements of type 4',
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.tokens', T.ARRAY, [1, 2, 3], T.U32)));
  add('type-scores-string', 'tokenizer.ggml.scores as a string', STATUS.FORMAT, 'tokenizer.ggml.scores: expected an array (type 9), found type 8',
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.scores', T.STRING, 'x')));
  add('type-add-bos-u32', 'tokenizer.ggml.add_bos_token as u32', STATUS.FORMAT, "metadata 'tokenizer.ggml.add_bos_token' has type u32, expected bool",
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.add_bos_token', T.U32, 1)));
  add('type-bos-f32', 'tokenizer.ggml.bos_token_id as f32', STATUS.FORMAT, "metadata 'tokenizer.ggml.bos_token_id' has type f32",
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.bos_token_id', T.F32, 1)));
  add('type-template-u32', 'tokenizer.chat_template as u32', STATUS.FORMAT, "metadata 'tokenizer.chat_template' has type u32, expected string",
    edit(spm, (d) => setKv(d, 'tokenizer.chat_template', T.U32, 1)));
  add('type-merges-u32', 'tokenizer.ggml.merges as a u32 array', STATUS.FORMAT, 'tokenizer.ggml.merges: expected an array of strings',
    edit(bpe, (d) => setKv(d, 'tokenizer.ggml.merges', T.ARRAY, [1], T.U32)));
  add('rope-base-nan', 'rope.freq_base NaN', STATUS.FORMAT, "metadata 'llama.rope.freq_base' is not a finite number",
    edit(spm, (d) => setKv(d, 'llama.rope.freq_base', T.F32, NaN)));
  add('rope-base-below-1', 'rope.freq_base 1e-30 (RoPE angles beyond any integer range)', STATUS.FORMAT, 'rope.freq_base must be positive (>= 1)',
    edit(spm, (d) => setKv(d, 'llama.rope.freq_base', T.F32, 1e-30)));
  add('rope-freqs-tiny', 'a rope_freqs.weight divisor of 1e-30', STATUS.FORMAT, 'rope_freqs.weight[1] must be a positive number',
    edit(bpe, (d) => { const t = tensor(d, 'rope_freqs.weight'); const f = new Float32Array(t.data.slice().buffer); f[1] = 1e-30; t.data = new Uint8Array(f.buffer); }));
  add('block-count-huge', 'block_count 2^31', STATUS.FORMAT, 'block_count 2147483648 out of range',
    edit(spm, (d) => setKv(d, 'llama.block_count', T.U32, 2 ** 31)));
  add('block-count-u64', 'block_count 2^32 + 1 as u64 (1 in 32 bits)', STATUS.FORMAT, "metadata 'llama.block_count' is out of range",
    edit(spm, (d) => setKv(d, 'llama.block_count', T.U64, (1n << 32n) + 1n)));

  // vocabulary / scores / merges
  const fewer = (d, key, t, n) => { const i = kvIndex(d, key); const dv = new DataView(d.kv[i].raw.buffer, d.kv[i].raw.byteOffset); const vals = []; for (let k = 0; k < n; k++) vals.push(t === T.F32 ? dv.getFloat32(12 + 4 * k, true) : dv.getInt32(12 + 4 * k, true)); setKv(d, key, T.ARRAY, vals, t); };
  add('scores-short', 'one score fewer than tokens', STATUS.FORMAT, `tokenizer.ggml.scores has ${nVocab - 1} entries but tokenizer.ggml.tokens has ${nVocab}`,
    edit(spm, (d) => fewer(d, 'tokenizer.ggml.scores', T.F32, nVocab - 1)));
  add('token-type-short', 'one token type fewer than tokens', STATUS.FORMAT, `tokenizer.ggml.token_type has ${nVocab - 1} entries but tokenizer.ggml.tokens has ${nVocab}`,
    edit(spm, (d) => fewer(d, 'tokenizer.ggml.token_type', T.I32, nVocab - 1)));
  add('tokens-vs-embeddings', 'one token more than token_embd.weight has rows', STATUS.FORMAT, `tensor token_embd.weight has shape [8, ${nVocab}], expected [8, ${nVocab + 1}]`,
    edit(spm, (d) => {
      setKv(d, 'tokenizer.ggml.tokens', T.ARRAY, [...arrayOf(d, 'tokenizer.ggml.tokens'), 'extra'], T.STRING);
      d.kv = d.kv.filter((e) => e.key !== 'tokenizer.ggml.scores' && e.key !== 'tokenizer.ggml.token_type');
    }));
  add('tokens-empty', 'an empty token list', STATUS.FORMAT, 'tokenizer.ggml.tokens is empty',
    edit(spm, (d) => { setKv(d, 'tokenizer.ggml.tokens', T.ARRAY, [], T.STRING); d.kv = d.kv.filter((e) => e.key !== 'tokenizer.ggml.scores' && e.key !== 'tokenizer.ggml.token_type'); }));
  add('tokenizer-unknown', 'tokenizer.ggml.model "rwkv"', STATUS.UNSUPPORTED, "unsupported tokenizer model 'rwkv'",
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.model', T.STRING, 'rwkv')));
  add('merges-missing', 'a gpt2 vocabulary without merges', STATUS.FORMAT, 'missing tokenizer.ggml.merges',
    edit(bpe, (d) => { d.kv = d.kv.filter((e) => e.key !== 'tokenizer.ggml.merges'); }));
  add('merge-no-space', 'a merge that is not two tokens', STATUS.FORMAT, "tokenizer.ggml.merges[0] = 'ab' is not two tokens separated by a space",
    edit(bpe, (d) => setKv(d, 'tokenizer.ggml.merges', T.ARRAY, ['ab', ...arrayOf(d, 'tokenizer.ggml.merges').slice(1)], T.STRING)));
  add('merges-count-past-value', 'a merge array whose count claims more entries than the file holds', STATUS.TRUNCATED, "metadata 'tokenizer.ggml.merges'",
    edit(bpe, (d) => { const i = kvIndex(d, 'tokenizer.ggml.merges'); const r = d.kv[i].raw.slice(); new DataView(r.buffer).setBigUint64(4, 1n << 36n, true); d.kv[i].raw = r; }));
  add('token-longer-than-array', 'a token string whose length points past its array', STATUS.TRUNCATED, "(in 'tokenizer.ggml.tokens') runs past the end of the file",
    edit(spm, (d) => { const i = kvIndex(d, 'tokenizer.ggml.tokens'); const r = d.kv[i].raw.slice(); new DataView(r.buffer).setBigUint64(12, 1n << 33n, true); d.kv[i].raw = r; }));

  // special token ids
  add('bos-out-of-range', 'bos_token_id = vocabulary size', STATUS.FORMAT, `tokenizer.ggml.bos_token_id = ${nVocab} is out of range (the vocabulary has ${nVocab} tokens)`,
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.bos_token_id', T.U32, nVocab)));
  add('eos-out-of-range', 'eos_token_id = 2^31', STATUS.FORMAT, 'tokenizer.ggml.eos_token_id = 2147483648 is out of range',
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.eos_token_id', T.U32, 2 ** 31)));
  add('eot-out-of-range', 'eot_token_id past the BPE vocabulary', STATUS.FORMAT, 'tokenizer.ggml.eot_token_id = 99999 is out of range',
    edit(bpe, (d) => setKv(d, 'tokenizer.ggml.eot_token_id', T.U32, 99999)));
  add('unk-negative-i32', 'unknown_token_id = -5 (i32)', STATUS.FORMAT, 'tokenizer.ggml.unknown_token_id',
    edit(spm, (d) => setKv(d, 'tokenizer.ggml.unknown_token_id', T.I32, -5)));

  // a chat template that is not valid Jinja: the model loads (the file is
  // fine for completion); chat() must reject with a message naming the template
  add('chat-template-invalid', 'tokenizer.chat_template that is not valid Jinja (loads; chat rejects)', STATUS.OK, '',
    edit(bpe, (d) => setKv(d, 'tokenizer.chat_template', T.STRING, '{% for message in messages %}{{ message.content }')));
  return cases;
}

// the u64 length of the first tensor name sits right after the metadata: find it
function patchNameLength(bytes, desc, _i, len) {
  const kvEnd = 24 + desc.kv.reduce((s, e) => s + 8 + enc.encode(e.key).length + 4 + e.raw.length, 0);
  const out = bytes.slice();
  new DataView(out.buffer).setBigUint64(kvEnd, len, true);
  return out;
}

const STATUS_NAME = Object.fromEntries(Object.entries(STATUS).map(([k, v]) => [v, k]));

export function writeCorpus(outDir) {
  fs.mkdirSync(outDir, { recursive: true });
  const cases = hostileCases();
  const lines = [];
  for (const c of cases) {
    fs.writeFileSync(path.join(outDir, `${c.name}.gguf`), c.bytes);
    for (const s of [c.message, c.what]) if (/[\t\n]/.test(s)) throw new Error(`case ${c.name}: tab or newline in text`);
    lines.push([`${c.name}.gguf`, STATUS_NAME[c.status], c.message, c.what].join('\t'));
  }
  fs.writeFileSync(path.join(outDir, 'manifest.tsv'), lines.join('\n') + '\n');
  return cases;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2] || 'build/hostile';
  const cases = writeCorpus(out);
  console.log(`make-hostile: ${cases.length} cases in ${out}`);
}
