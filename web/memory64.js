// The memory64 (wasm64) engine builds: model files that the 4 GiB of a
// wasm32 memory cannot hold load into a build with 64-bit pointers and a
// memory of up to 16 GiB, where the runtime supports it. Shared by the
// caller's side (web/index.js: the probe, the choice, the size error) and the
// model's worker (web/worker/engine.js: the memory, the exports).
//
// In a wasm64 build every pointer and size_t is an i64, which JS sees as a
// BigInt. The rest of the JS keeps using Numbers (addresses stay far below
// 2^53): wrapExports() wraps each export whose type has an i64 once, at
// instantiation, with the types read from the module's own type, import,
// function and export sections (describeModule) — i64 arguments accept a
// Number or a BigInt, i64 results come back as Numbers.
import { WasmlmError } from './errors.js';

/** Bytes a wasm32 memory can address: 65536 pages of 64 KiB. */
export const WASM32_MAX_BYTES = 2 ** 32;
/** Bytes of the wasm64 builds' memory: 262144 pages, the most V8 gives a
 * memory64 memory (WLM_WASM_MEMORY_MAX in src/base.h, --max-memory in the Makefile). */
export const WASM64_MAX_BYTES = 2 ** 34;
/** Room the model's tables and a context take beside its file: a file
 * larger than WASM32_MAX_BYTES minus this picks the wasm64 build ('auto'). */
export const CONTEXT_RESERVE = 512 * 2 ** 20;
const PAGE = 65536;

/**
 * A WebAssembly.Memory for an engine build: `initial` and `maximum` in bytes.
 * A memory64 one is described as the JS API's memory64 form has it
 * ({address: 'i64'} with BigInt sizes); a runtime without it throws.
 */
export function createMemory({ memory64 = false, shared = false, initial, maximum }) {
  if (!memory64) return new WebAssembly.Memory({ initial: initial / PAGE, maximum: maximum / PAGE, shared });
  return new WebAssembly.Memory({ address: 'i64', initial: BigInt(initial / PAGE), maximum: BigInt(maximum / PAGE), shared });
}

// ---- the module's own types -------------------------------------------------------

const VALTYPES = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64', 0x7b: 'v128', 0x70: 'funcref', 0x6f: 'externref' };

/**
 * What the engine's JS needs to know of a wasm module, read from its bytes:
 * {memory64, shared} of its imported memory and each exported function's
 * {params, results} (value type names: 'i32', 'i64', ...).
 * @param {BufferSource} bytes
 */
export function describeModule(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : ArrayBuffer.isView(bytes)
    ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  let pos = 8;
  const fail = (what) => { throw new Error(`describeModule: ${what} at byte ${pos}`); };
  if (u8.length < 8 || u8[0] !== 0 || u8[1] !== 0x61 || u8[2] !== 0x73 || u8[3] !== 0x6d) fail('not a wasm module');
  const byte = () => (pos < u8.length ? u8[pos++] : fail('unexpected end'));
  const leb = () => { // unsigned LEB128 (sizes here stay far below 2^53)
    let v = 0, mul = 1, b;
    do { b = byte(); v += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
    return v;
  };
  const name = () => { const n = leb(); pos += n; return n; };
  const valtype = () => { const b = byte(); return VALTYPES[b] || fail(`value type 0x${b.toString(16)}`); };
  const limits = () => { const flags = byte(); leb(); if (flags & 1) leb(); return flags; };
  const types = [], funcs = [], exports = {};
  let memory64 = false, shared = false;
  while (pos < u8.length) {
    const id = byte(), size = leb(), end = pos + size;
    if (id === 1) {           // type: func types only (no GC types in our builds)
      for (let n = leb(); n > 0; n--) {
        if (byte() !== 0x60) fail('a type that is not a function type');
        const params = Array.from({ length: leb() }, valtype);
        const results = Array.from({ length: leb() }, valtype);
        types.push({ params, results });
      }
    } else if (id === 2) {    // imports: functions take a function index first
      for (let n = leb(); n > 0; n--) {
        name(); name();
        const kind = byte();
        if (kind === 0) funcs.push(leb());
        else if (kind === 1) { byte(); limits(); }
        else if (kind === 2) { const f = limits(); memory64 = (f & 4) !== 0; shared = (f & 2) !== 0; }
        else if (kind === 3) { valtype(); byte(); }
        else fail(`import kind ${kind}`);
      }
    } else if (id === 3) {    // functions: their types
      for (let n = leb(); n > 0; n--) funcs.push(leb());
    } else if (id === 5) {    // a memory of its own
      for (let n = leb(); n > 0; n--) { const f = limits(); memory64 = (f & 4) !== 0; shared = (f & 2) !== 0; }
    } else if (id === 7) {    // exports
      for (let n = leb(); n > 0; n--) {
        const len = leb();
        const key = new TextDecoder().decode(u8.subarray(pos, pos + len));
        pos += len;
        const kind = byte(), index = leb();
        if (kind === 0) {
          const t = types[funcs[index]];
          if (!t) fail(`export ${key}: function ${index} has no type`);
          exports[key] = t;
        }
      }
    }
    pos = end;
  }
  return { memory64, shared, exports };
}

/**
 * The exports of an instance with every function whose type has an i64
 * wrapped: i64 arguments given as Numbers become BigInts, i64 results come
 * back as Numbers. Everything else is passed through as it is.
 * @param {WebAssembly.Exports} exports
 * @param {{exports: Object<string, {params: string[], results: string[]}>}} described describeModule's result
 */
export function wrapExports(exports, described) {
  const out = {};
  for (const [key, v] of Object.entries(exports)) {
    const t = described.exports[key];
    if (typeof v !== 'function' || !t || !(t.params.includes('i64') || t.results.includes('i64'))) { out[key] = v; continue; }
    const wide = t.params.map((p, i) => (p === 'i64' ? i : -1)).filter((i) => i >= 0);
    const wideResult = t.results[0] === 'i64';
    out[key] = (...args) => {
      for (const i of wide) if (typeof args[i] === 'number') args[i] = BigInt(args[i]);
      const r = v(...args);
      return wideResult ? Number(r) : r;
    };
  }
  return out;
}

// ---- the probe ---------------------------------------------------------------------

function expected(seed) {
  let total = 0;
  for (let i = 0; i < 64; i++) total += (i * 7 + seed) & 255;
  return (seed & 1 ? Math.imul(total ^ seed, 17) : Math.imul(total, 31) + seed) >>> 0;
}

/**
 * Whether this runtime runs the memory64 builds: the probe module
 * (wasm/probe-memory64.wasm: a 64-bit memory and function table, SIMD at
 * 64-bit addresses) must compile, a memory64 memory of the builds' maximum
 * (16 GiB) must be creatable, and the probe must return the known answer.
 * @param {BufferSource|WebAssembly.Module} probe the probe's bytes or module
 * @returns {Promise<{ok: boolean, shared: boolean, reason: string|null}>}
 *   `shared`: a shared memory64 memory can be made too (the threaded builds);
 *   `reason`: why not, in the runtime's words
 */
export async function probeMemory64(probe) {
  let mod, memory;
  try {
    mod = probe instanceof WebAssembly.Module ? probe : await WebAssembly.compile(probe);
  } catch (e) {
    return { ok: false, shared: false, reason: `this runtime does not compile memory64 modules (${e.message})` };
  }
  try {
    memory = createMemory({ memory64: true, initial: 2 << 20, maximum: WASM64_MAX_BYTES });
  } catch (e) {
    return { ok: false, shared: false, reason: `this runtime cannot create a memory64 memory of ${WASM64_MAX_BYTES / 2 ** 30} GiB (${e.message})` };
  }
  try {
    const { exports } = await WebAssembly.instantiate(mod, { env: { memory } });
    if (exports.pointer_bytes() !== 8) return { ok: false, shared: false, reason: 'the memory64 probe does not have 64-bit pointers' };
    for (const seed of [0, 1, 77, 200]) {
      if ((exports.probe(seed) >>> 0) !== expected(seed)) return { ok: false, shared: false, reason: `the memory64 probe computed a wrong answer for seed ${seed}` };
    }
  } catch (e) {
    return { ok: false, shared: false, reason: `the memory64 probe does not run (${e.message})` };
  }
  let shared = false;
  if (typeof SharedArrayBuffer !== 'undefined') {
    try { createMemory({ memory64: true, shared: true, initial: 2 << 20, maximum: WASM64_MAX_BYTES }); shared = true; } catch { /* single-threaded only */ }
  }
  return { ok: true, shared, reason: null };
}

// ---- the size check -------------------------------------------------------------------

const gib = (n) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/**
 * TOO_LARGE: a model of `size` bytes that the build this runtime can run
 * cannot hold. Names the size, the limit and what would lift it.
 * @param {number} size bytes of the model file (all parts)
 * @param {{what?: string, atLeast?: boolean, memory64?: boolean, reason?: string}} [o]
 *   what: the file ('the model file', a URL, ...); atLeast: `size` is what
 *   arrived so far; memory64: the limit is the wasm64 builds' own (16 GiB),
 *   not wasm32's; reason: why no wasm64 build is used
 */
export function tooLargeError(size, { what = 'the model file', atLeast = false, memory64 = false, reason = 'memory64 is not available' } = {}) {
  const limit = memory64 ? WASM64_MAX_BYTES : WASM32_MAX_BYTES;
  const is = `${what} is ${atLeast ? 'at least ' : ''}${gib(size)} (${size} bytes)`;
  const msg = memory64
    ? `${is}: over the ${limit / 2 ** 30} GiB of memory a memory64 (wasm64) engine can have`
    : `${is}: over the 4 GiB a wasm32 engine can address; it needs the memory64 (wasm64) build, which is not used here: ${reason}`;
  return new WasmlmError('TOO_LARGE', msg, { size, limit });
}
