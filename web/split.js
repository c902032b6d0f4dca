// Split GGUFs: a model published as NAME-00001-of-00003.gguf,
// NAME-00002-of-00003.gguf, ... (each part a GGUF file; the C loader,
// wlm_model_load_parts, checks that the parts belong together). Here: the
// part names, shared by the caller's side (URLs, Blobs/Files), the worker
// (Node paths) and the CLI. Caller-safe: no Node or browser APIs.
import { WasmlmError } from './errors.js';

const SPLIT_RE = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** Most parts a split may have (split.count is a u16). */
export const MAX_SPLIT_PARTS = 65535;

/**
 * The split part named by `name` (a path, a file name or a URL path):
 * {prefix, no (1-based), count} or null when it is not a part name
 * (or names a split of one part, which is a plain file).
 */
export function parseSplitName(name) {
  const m = SPLIT_RE.exec(String(name));
  if (!m) return null;
  const no = Number(m[2]), count = Number(m[3]);
  if (count < 2 || no < 1) return null;
  return { prefix: m[1], no, count };
}

/** The name of part `no` (1-based) of `count`: PREFIX-0000N-of-0000C.gguf. */
export function splitPartName(prefix, no, count) {
  const pad = (n) => String(n).padStart(5, '0');
  return `${prefix}-${pad(no)}-of-${pad(count)}.gguf`;
}

/**
 * Every part's name, from the first part's; throws BAD_FILE when `first` is
 * another part (the first holds the model's metadata: start there).
 * @returns {string[]|null} null for a name that is not a split part
 */
export function splitPartNames(first) {
  const s = parseSplitName(first);
  if (!s) return null;
  if (s.no !== 1) {
    throw new WasmlmError('BAD_FILE', `${first} is part ${s.no} of ${s.count} of a split GGUF: load the first part, ${splitPartName(s.prefix, 1, s.count)}`,
      { file: String(first), part: s.no, parts: s.count });
  }
  return Array.from({ length: s.count }, (_, i) => splitPartName(s.prefix, i + 1, s.count));
}

/** The URLs of every part of a split GGUF from the first part's URL (query and hash kept), or null. */
export function splitPartUrls(url) {
  let u;
  try { u = new URL(url); } catch { return null; }
  if (!/^https?:$/i.test(u.protocol)) return null;
  const names = splitPartNames(u.pathname);
  if (!names) return null;
  return names.map((p) => { const v = new URL(u.href); v.pathname = p; return v.href; });
}

/**
 * Checks named parts (Files: their `name`) before any byte is read: every
 * part of one split, once, in order. Nameless parts (Blobs, buffers) are left
 * to the engine, which checks split.no / split.count / split.tensors.count.
 * @param {string[]} names one per part ('' for a nameless one)
 */
export function checkSplitNames(names) {
  const base = (n) => String(n).replace(/^.*[\\/]/, '');
  if (names.length === 0 || names.some((n) => !n)) return;
  if (names.length === 1 && !parseSplitName(base(names[0]))) return;   // a plain file
  const parsed = names.map((n) => parseSplitName(base(n)));
  const bad = parsed.findIndex((p) => !p);
  if (bad >= 0) {
    throw new WasmlmError('BAD_FILE', `${base(names[bad])} (place ${bad + 1} of ${names.length}) is not named as a split GGUF part (NAME-00001-of-00003.gguf)`,
      { file: base(names[bad]), part: bad + 1 });
  }
  const { prefix, count } = parsed[0];
  for (let i = 0; i < parsed.length; i++) {
    const p = parsed[i], name = base(names[i]);
    if (p.prefix !== prefix || p.count !== count) {
      throw new WasmlmError('BAD_FILE', `${name} belongs to another split GGUF than ${base(names[0])} (${p.prefix !== prefix ? 'another name' : `${p.count} parts, not ${count}`})`,
        { file: name, part: i + 1 });
    }
    const seen = parsed.findIndex((q) => q.no === p.no);
    if (seen < i) throw new WasmlmError('BAD_FILE', `split GGUF part ${name} is given twice (places ${seen + 1} and ${i + 1})`, { file: name, part: p.no });
  }
  for (let i = 0; i < parsed.length; i++) {
    if (parsed[i].no !== i + 1) {
      const want = splitPartName(prefix, i + 1, count);
      const given = parsed.some((q) => q.no === i + 1);
      throw new WasmlmError('BAD_FILE', given
        ? `split GGUF parts out of order: place ${i + 1} holds ${base(names[i])}, expected ${want} (pass the parts in order)`
        : `split GGUF part ${i + 1} of ${count} is missing: ${want}`, { file: want, part: i + 1 });
    }
  }
  if (parsed.length !== count) {
    const want = splitPartName(prefix, parsed.length + 1, count);
    throw new WasmlmError('BAD_FILE', `split GGUF part ${parsed.length + 1} of ${count} is missing: ${want}`, { file: want, part: parsed.length + 1 });
  }
}

/** Files in split part order (by name; files not named as parts keep their order after them). */
export function sortSplitFiles(files) {
  const key = (f) => { const p = parseSplitName(f.name || ''); return p ? p.no : Infinity; };
  return [...files].map((f, i) => ({ f, i })).sort((a, b) => (key(a.f) - key(b.f)) || (a.i - b.i)).map((x) => x.f);
}
