// Split GGUFs on disk: `wasmlm split IN --max-size 2G` writes
// IN-00001-of-0000N.gguf ... beside IN (a tensor is never cut: each part
// holds whole tensors; the first part the model's metadata, every part the
// keys split.no (u16, 0-based), split.count (u16) and split.tensors.count
// (i32)); `wasmlm merge FIRST OUT` joins them again. Tensor data is copied
// in chunks, never held whole. Merging a split of a file whose tensors lie in
// table order, each at the next aligned offset (as llama.cpp and
// models/gguf-writer.js write them), gives back the very bytes of the file.
import fs from 'node:fs';
import { WasmlmError } from '../web/errors.js';
import { splitPartNames, splitPartName, MAX_SPLIT_PARTS } from '../web/split.js';
import { T, writeGGUFRaw } from './gguf-writer.js';

const COPY_CHUNK = 8 << 20;

/** Block size (elements) and bytes per block of the GGML types, by id (the public format). */
const GGML_BLOCKS = {
  0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34], 9: [32, 36],
  10: [256, 84], 11: [256, 110], 12: [256, 144], 13: [256, 176], 14: [256, 210], 15: [256, 292],
  24: [1, 1], 25: [1, 2], 26: [1, 4], 27: [1, 8], 28: [1, 8], 30: [1, 2],
};

/**
 * "2G", "512M", "100K", "4096": bytes (K, M, G are powers of 1024; an
 * optional trailing B or iB is allowed).
 */
export function parseSize(s) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$/i.exec(String(s));
  if (!m) throw new WasmlmError('BAD_OPTION', `--max-size: a size such as 2G, 500M, 64K or a number of bytes, got '${s}'`, { option: 'max-size' });
  const n = Math.floor(Number(m[1]) * 1024 ** ' kmg'.indexOf((m[2] || ' ').toLowerCase()));
  if (!(n > 0) || !Number.isSafeInteger(n)) throw new WasmlmError('BAD_OPTION', `--max-size must be positive, got '${s}'`, { option: 'max-size' });
  return n;
}

class NeedMore extends Error {}

/**
 * Reads a GGUF file's header: {version, alignment, kv: [{key, type, raw}],
 * tensors: [{name, nDims, ne: bigint[], type, offset, nbytes}], dataStart, size}.
 * `raw` is a value's encoding (after its type), `offset` relative to the
 * data section; any value that runs past the file is a BAD_FORMAT error naming it.
 */
export function readGgufHeader(file) {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    for (let n = Math.min(size, 1 << 20); ; n = Math.min(size, n * 4)) {
      const buf = Buffer.alloc(n);
      const got = fs.readSync(fd, buf, 0, n, 0);
      try {
        return parseHeader(buf.subarray(0, got), size, file);
      } catch (e) {
        if (!(e instanceof NeedMore)) throw e;
        if (n >= size) throw new WasmlmError('BAD_FORMAT', `${file}: the GGUF header runs past the end of the file (${size} bytes)`, { file });
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

function parseHeader(u8, size, file) {
  const bad = (msg) => new WasmlmError('BAD_FORMAT', `${file}: ${msg}`, { file });
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  let p = 0;
  const need = (n) => { if (p + n > u8.length) throw new NeedMore(); };
  const u32 = () => { need(4); const v = dv.getUint32(p, true); p += 4; return v; };
  const u64 = () => { need(8); const v = dv.getBigUint64(p, true); p += 8; return v; };
  const len = (what) => { const n = u64(); if (n > BigInt(size)) throw bad(`${what} of length ${n} is longer than the file`); return Number(n); };
  const str = (what) => { const n = len(what); need(n); const s = u8.subarray(p, p + n).toString('utf8'); p += n; return s; };
  const SIZES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
  const skip = (t, depth) => {
    if (t === T.STRING) { const n = len('a string'); need(n); p += n; return; }
    if (t === T.ARRAY) {
      if (depth > 4) throw bad('arrays nested too deep');
      const et = u32(), n = len('an array');
      if (et >= SIZES.length) throw bad(`unknown array element type ${et}`);
      if (et !== T.STRING && et !== T.ARRAY) { need(n * SIZES[et]); p += n * SIZES[et]; return; }
      for (let i = 0; i < n; i++) skip(et, depth + 1);
      return;
    }
    if (t >= SIZES.length) throw bad(`unknown value type ${t}`);
    need(SIZES[t]); p += SIZES[t];
  };
  need(24);
  if (u32() !== 0x46554747) throw bad('not a GGUF file');
  const version = u32();
  if (version < 2 || version > 3) throw bad(`unsupported GGUF version ${version}`);
  const nt = u64(), nkv = u64();
  if (nt > BigInt(size) / 32n || nkv > BigInt(size) / 13n) throw bad('absurd tensor or metadata count');
  const kv = [];
  for (let i = 0; i < Number(nkv); i++) {
    const key = str('a metadata key'), type = u32(), s = p;
    skip(type, 0);
    kv.push({ key, type, raw: Uint8Array.from(u8.subarray(s, p)) });
  }
  const al = kv.find((e) => e.key === 'general.alignment');
  const alignment = al && al.type === T.U32 ? new DataView(al.raw.buffer).getUint32(0, true) : 32;
  if (!alignment || alignment & (alignment - 1)) throw bad(`general.alignment ${alignment} is not a power of two`);
  const tensors = [];
  for (let i = 0; i < Number(nt); i++) {
    const name = str('a tensor name'), nDims = u32();
    if (nDims < 1 || nDims > 4) throw bad(`tensor ${name} has ${nDims} dimensions`);
    const ne = [];
    for (let d = 0; d < nDims; d++) ne.push(u64());
    const type = u32(), offset = Number(u64());
    tensors.push({ name, nDims, ne, type, offset, nbytes: 0 });
  }
  const dataStart = Math.ceil(p / alignment) * alignment;
  // each tensor's size from its type; a type this table lacks: up to the next tensor (or the end)
  const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
  byOffset.forEach((t, i) => {
    const blk = GGML_BLOCKS[t.type];
    const room = (i + 1 < byOffset.length ? byOffset[i + 1].offset : size - dataStart) - t.offset;
    if (blk) {
      const nel = t.ne.reduce((a, b) => a * b, 1n);
      t.nbytes = Number(nel / BigInt(blk[0]) * BigInt(blk[1]));
    } else t.nbytes = room;
    if (dataStart + t.offset + t.nbytes > size) throw bad(`tensor ${t.name} runs past the end of the file`);
    if (t.nbytes > room) throw bad(`tensor ${t.name} overlaps the next one`);
  });
  // the layout writers use: tensors in table order, each at the next aligned offset
  let next = 0, canonical = true;
  for (const t of tensors) {
    if (t.offset !== next) canonical = false;
    next = Math.ceil((t.offset + t.nbytes) / alignment) * alignment;
  }
  const last = tensors.length ? tensors[tensors.length - 1] : null;
  const dataEnd = last ? dataStart + last.offset + last.nbytes : dataStart;
  const paddedEnd = Math.ceil(dataEnd / alignment) * alignment;
  if (size !== dataEnd && size !== paddedEnd) canonical = false;
  return { version, alignment, kv, tensors, dataStart, size, canonical, padEnd: size === paddedEnd && size !== dataEnd };
}

function u16Raw(v) { const b = new Uint8Array(2); new DataView(b.buffer).setUint16(0, v, true); return b; }
function i32Raw(v) { const b = new Uint8Array(4); new DataView(b.buffer).setInt32(0, v, true); return b; }
const splitKeys = (no, count, total) => [
  { key: 'split.no', type: T.U16, raw: u16Raw(no) },
  { key: 'split.count', type: T.U16, raw: u16Raw(count) },
  { key: 'split.tensors.count', type: T.I32, raw: i32Raw(total) },
];
const isSplitKey = (e) => e.key.startsWith('split.');

/** Bytes a header with these pairs and tensors takes (before the alignment padding). */
function headerBytes(kv, tensors) {
  let n = 24;
  for (const e of kv) n += 8 + Buffer.byteLength(e.key) + 4 + e.raw.length;
  for (const t of tensors) n += 8 + Buffer.byteLength(t.name) + 4 + 8 * t.nDims + 4 + 8;
  return n;
}

/** A tensor whose data is copied from `fd` at `at`, in chunks. */
function copying(fd, t, at) {
  return {
    name: t.name, ne: t.ne, type: t.type, nbytes: t.nbytes,
    write: (emit) => {
      const buf = Buffer.alloc(Math.min(COPY_CHUNK, Math.max(1, t.nbytes)));
      for (let done = 0; done < t.nbytes;) {
        const n = fs.readSync(fd, buf, 0, Math.min(buf.length, t.nbytes - done), at + done);
        if (n <= 0) throw new WasmlmError('BAD_FILE', `tensor ${t.name}: the file ended while copying it`);
        emit(buf.subarray(0, n));
        done += n;
      }
    },
  };
}

/**
 * Splits `input` into parts of at most `maxBytes` each (a tensor bigger than
 * that gets a part of its own), written beside it as PREFIX-0000i-of-0000N.gguf.
 * @returns {{parts: string[], sizes: number[], oversized: string[], identical: boolean}} identical: merging
 *   the parts gives back these very bytes (false: the same model, laid out anew)
 */
export function splitGguf(input, maxBytes) {
  const h = readGgufHeader(input);
  if (h.kv.some(isSplitKey)) throw new WasmlmError('BAD_FILE', `${input} is already a part of a split GGUF (it has split.* keys): merge it first`, { file: input });
  if (!h.tensors.length) throw new WasmlmError('BAD_FILE', `${input} has no tensors to split`, { file: input });
  const kv0 = [...h.kv, ...splitKeys(0, 1, h.tensors.length)];
  // the other parts: the split keys, and the alignment their data follows when it is not the default
  const alignKv = h.kv.filter((e) => e.key === 'general.alignment');
  const kvN = [...splitKeys(0, 1, h.tensors.length), ...alignKv];
  const fileBytes = (kv, ts) => {
    let end = Math.ceil(headerBytes(kv, ts) / h.alignment) * h.alignment;
    for (const t of ts) end = Math.ceil(end / h.alignment) * h.alignment + t.nbytes;
    return end;
  };
  // greedy, in table order: a part takes tensors while the file stays within maxBytes
  const plan = [];
  let cur = [];
  const oversized = [];
  for (const t of h.tensors) {
    const kv = plan.length === 0 ? kv0 : kvN;
    if (cur.length && fileBytes(kv, [...cur, t]) > maxBytes) { plan.push(cur); cur = []; }
    cur.push(t);
    if (fileBytes(plan.length === 0 ? kv0 : kvN, cur) > maxBytes) oversized.push(t.name);
  }
  plan.push(cur);
  if (plan.length > MAX_SPLIT_PARTS) throw new WasmlmError('BAD_OPTION', `--max-size ${maxBytes} would make ${plan.length} parts (at most ${MAX_SPLIT_PARTS})`, { option: 'max-size' });
  const prefix = input.replace(/\.gguf$/i, '');
  const parts = plan.map((_, i) => splitPartName(prefix, i + 1, plan.length));
  const fd = fs.openSync(input, 'r');
  try {
    plan.forEach((ts, i) => {
      const keys = splitKeys(i, plan.length, h.tensors.length);
      const kv = i === 0 ? [...h.kv, ...keys] : [...keys, ...alignKv];
      writeGGUFRaw(parts[i], { version: h.version, alignment: h.alignment, kv, tensors: ts.map((t) => copying(fd, t, h.dataStart + t.offset)),
        padEnd: i < plan.length - 1 || h.padEnd });
    });
  } finally {
    fs.closeSync(fd);
  }
  return { parts, sizes: parts.map((p) => fs.statSync(p).size), oversized, identical: h.canonical };
}

/**
 * Joins the parts of a split GGUF (given its first part) into `output`: the
 * first part's metadata without the split.* keys, every part's tensors in
 * order. Checks that the parts belong together first (BAD_FILE naming a
 * missing part, BAD_FORMAT one of another split, out of place, or a tensor
 * count that does not add up).
 * @returns {{parts: string[], size: number}}
 */
export function mergeGguf(first, output) {
  const names = splitPartNames(first);
  if (!names) throw new WasmlmError('BAD_FILE', `${first} is not named as the first part of a split GGUF (NAME-00001-of-0000N.gguf)`, { file: first });
  for (const [i, p] of names.entries()) {
    if (!fs.existsSync(p)) throw new WasmlmError('BAD_FILE', `split GGUF part ${i + 1} of ${names.length} (${p}) is missing`, { file: p, part: i + 1 });
  }
  const resolved = (p) => { try { return fs.realpathSync(p); } catch { return p; } };
  if (names.some((p) => resolved(p) === resolved(output))) throw new WasmlmError('BAD_OPTION', `merge: the output ${output} is one of the parts`, { option: 'OUT' });
  const heads = names.map((p) => readGgufHeader(p));
  const keyOf = (h, key) => {
    const e = h.kv.find((x) => x.key === key);
    if (!e) return null;
    const dv = new DataView(e.raw.buffer, e.raw.byteOffset, e.raw.byteLength);
    return e.type === T.U16 ? dv.getUint16(0, true) : e.type === T.I32 ? dv.getInt32(0, true) : e.type === T.U32 ? dv.getUint32(0, true) : null;
  };
  const total = keyOf(heads[0], 'split.tensors.count');
  heads.forEach((h, i) => {
    const what = `split GGUF part ${i + 1} of ${names.length} (${names[i]})`;
    if (keyOf(h, 'split.count') !== names.length) throw new WasmlmError('BAD_FORMAT', `${what} belongs to another split: split.count ${keyOf(h, 'split.count')}`, { file: names[i], part: i + 1 });
    if (keyOf(h, 'split.no') !== i) throw new WasmlmError('BAD_FORMAT', `${what} holds split.no ${keyOf(h, 'split.no')}, expected ${i}`, { file: names[i], part: i + 1 });
  });
  const found = heads.reduce((a, h) => a + h.tensors.length, 0);
  if (total !== null && total !== found) throw new WasmlmError('BAD_FORMAT', `${first}: the parts hold ${found} tensors, split.tensors.count says ${total}`, { file: first });
  const fds = names.map((p) => fs.openSync(p, 'r'));
  const tmp = `${output}.tmp-${process.pid}`;
  try {
    const tensors = heads.flatMap((h, i) => h.tensors.map((t) => copying(fds[i], t, h.dataStart + t.offset)));
    writeGGUFRaw(tmp, { version: heads[0].version, alignment: heads[0].alignment, kv: heads[0].kv.filter((e) => !isSplitKey(e)), tensors,
      padEnd: heads[heads.length - 1].padEnd });
    fs.renameSync(tmp, output);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  } finally {
    for (const fd of fds) fs.closeSync(fd);
  }
  return { parts: names, size: fs.statSync(output).size };
}
