// Reads a model file named by a Node path into the engine (web/worker/worker.js,
// op loadFile). The path is untrusted: it may name a directory, a socket, or
// a huge file that is not a GGUF file at all. FIFOs, pipes (`-m <(cat f)`)
// and devices are read on the caller's thread as streams (web/index.js,
// specialFileStream), never here. Node's `fs` is passed in, so this file
// imports nothing from Node and browser bundles of the worker stay
// self-contained.
import { WasmlmError } from '../errors.js';
import { ggufHeaderProblem, badFileError } from './gguf.js';
import { splitPartNames } from '../split.js';
import { PART_ALIGN } from './staging.js';

const CHUNK = 16 << 20;   // read size of regular files, and progress step
const HEAD = 64 << 10;    // first read of a regular file: the header is checked before anything is reserved

/**
 * Loads `path` into `engine` (beginLoad / write, not finishLoad). With
 * io.vocabOnly (a tokenizer) only the header and metadata are read: of a
 * split GGUF its first part, of any file no more than its metadata
 * (engine.metaProgress), growing each read from 64 KiB.
 * @param {object} io {fs, vocabOnly?: boolean, aborted(): boolean, progress(loaded, total) | null}
 */
export function readModelFile(engine, path, io) {
  const st = statFile(io.fs, path);
  if (st.isDirectory()) throw new WasmlmError('BAD_FILE', `model file ${path} is a directory, not a GGUF file`, { file: path });
  if (st.isFile()) {
    const parts = io.vocabOnly ? null : splitPartNames(path);   // NAME-00001-of-0000N.gguf: every part, streamed one after the other
    return parts ? readSplit(engine, parts, io) : readRegular(engine, path, io);
  }
  if (st.isSocket()) throw new WasmlmError('BAD_FILE', `model file ${path} is a socket, not a file`, { file: path });
  // (a FIFO or device: the caller streams it; here only if the path changed in between)
  throw new WasmlmError('BAD_FILE', `model file ${path} is not a regular file`, { file: path });
}

function statFile(fs, path) {
  try {
    return fs.statSync(path);
  } catch (e) {
    throw new WasmlmError('BAD_FILE', `cannot open model file ${path}: ${e.code || e.message}`, { file: path, cause: e });
  }
}

function openFd(fs, path, flags) {
  try {
    return fs.openSync(path, flags);
  } catch (e) {
    throw new WasmlmError('BAD_FILE', `cannot open model file ${path}: ${e.code || e.message}`, { file: path, cause: e });
  }
}

function abortError() { return Object.assign(new Error('load aborted'), { name: 'AbortError', code: 'ABORTED' }); }

/** A regular file: its size is known; the first bytes are checked before the engine reserves it. */
function readRegular(engine, path, io) {
  const f = openRegular(io.fs, path, `model file ${path}`);
  try {
    engine.beginLoad(f.size, { vocabOnly: !!io.vocabOnly });
    readBody(engine, f, io, 0, f.size);
  } finally {
    io.fs.closeSync(f.fd);
  }
}

/**
 * A split GGUF: every part is opened, checked to be a regular file and to
 * start like a GGUF file before the engine reserves anything (a missing part
 * fails naming it), then the parts are read one after the other into one
 * block (the engine checks that they belong together).
 */
function readSplit(engine, paths, io) {
  const files = [];
  try {
    paths.forEach((p, i) => {
      const what = `split GGUF part ${i + 1} of ${paths.length} (${p})`;
      let st;
      try { st = io.fs.statSync(p); } catch (e) {
        throw new WasmlmError('BAD_FILE', e.code === 'ENOENT' ? `${what} is missing` : `cannot open ${what}: ${e.code || e.message}`,
          { file: p, part: i + 1, parts: paths.length, cause: e });
      }
      if (!st.isFile()) throw new WasmlmError('BAD_FILE', `${what} is not a regular file`, { file: p, part: i + 1, parts: paths.length });
      files.push(openRegular(io.fs, p, what));
    });
    const total = files.reduce((a, f) => a + f.size, 0);
    engine.beginLoad(total + PART_ALIGN * files.length);
    let done = 0;
    files.forEach((f, i) => {
      if (i > 0) engine.nextPart(f.size);
      readBody(engine, f, io, done, total);
      done += f.size;
    });
  } finally {
    for (const f of files) io.fs.closeSync(f.fd);
  }
}

/** Opens a regular file and reads and checks its first bytes: {fd, size, head}. */
function openRegular(fs, path, what) {
  const fd = openFd(fs, path, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const head = new Uint8Array(Math.min(size, HEAD));
    const got = head.length ? fs.readSync(fd, head, 0, head.length, 0) : 0;
    const problem = ggufHeaderProblem(head.subarray(0, got), got < 4);
    if (problem) throw badFileError(what, problem);
    return { fd, size, head: head.subarray(0, got), path };
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
}

/** Writes an opened file's bytes after those already written; progress counts from `before` of `total`.
 * A vocabulary-only load stops once the metadata is in (reads of at least what it still needs, doubling). */
function readBody(engine, f, io, before, total) {
  const { fs } = io;
  engine.write(f.head);
  let loaded = f.head.length, lastReport = 0;
  let meta = io.vocabOnly ? engine.metaProgress() : null;
  while (loaded < f.size && !(meta && meta.done)) {
    if (io.aborted()) throw abortError();
    const want = meta ? Math.max(meta.need - loaded, loaded) : CHUNK;
    const n = Math.min(CHUNK, want, f.size - loaded);
    const r = fs.readSync(f.fd, engine.writeView(n), 0, n, loaded);
    if (r <= 0) throw new WasmlmError('BAD_FILE', `model file ${f.path} ended at ${loaded} of ${f.size} bytes (it shrank while being read)`, { file: f.path });
    engine.advance(r);
    loaded += r;
    if (meta) meta = engine.metaProgress();
    if (io.progress && (loaded === f.size || loaded - lastReport >= CHUNK)) { lastReport = loaded; io.progress(before + loaded, total); }
  }
  if (io.progress && loaded === f.head.length) io.progress(before + loaded, total);
  if (meta && io.progress && loaded < f.size) io.progress(before + loaded, before + loaded);   // read all it needed
}
