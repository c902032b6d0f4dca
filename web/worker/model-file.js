// Reads a model file named by a Node path into the engine (web/worker/worker.js,
// op loadFile). The path is untrusted: it may name a directory, a FIFO that
// has no writer yet, a process substitution (`-m <(cat f)`: /dev/fd/N, a
// pipe), a device, or a huge file that is not a GGUF file at all. Node's
// modules are passed in (`fs`, `net`), so this file imports nothing from Node
// and browser bundles of the worker stay self-contained.
import { WasmlmError } from '../errors.js';
import { ggufHeaderProblem, badFileError } from './gguf.js';

const CHUNK = 16 << 20;   // read size of regular files, and progress step
const HEAD = 64 << 10;    // first read of a regular file: the header is checked before anything is reserved

/**
 * Loads `path` into `engine` (beginLoad / write, not finishLoad).
 * @param {object} io {fs, net, aborted(): boolean, onAbort(fn): () => void (unsubscribe), progress(loaded, total) | null}
 */
export async function readModelFile(engine, path, io) {
  const st = statFile(io.fs, path);
  if (st.isDirectory()) throw new WasmlmError('BAD_FILE', `model file ${path} is a directory, not a GGUF file`, { file: path });
  if (st.isFile()) return readRegular(engine, path, io);
  if (st.isSocket()) throw new WasmlmError('BAD_FILE', `model file ${path} is a socket, not a file`, { file: path });
  // FIFOs, pipes (/dev/fd/N) and devices: read until the end, size unknown
  return readStream(engine, path, openStream(io, path, st), io);
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
  const { fs } = io;
  const fd = openFd(fs, path, 'r');
  try {
    const total = fs.fstatSync(fd).size;
    const head = new Uint8Array(Math.min(total, HEAD));
    const got = head.length ? fs.readSync(fd, head, 0, head.length, 0) : 0;
    const problem = ggufHeaderProblem(head.subarray(0, got), got < 4);
    if (problem) throw badFileError(`model file ${path}`, problem);
    engine.beginLoad(total);
    engine.write(head.subarray(0, got));
    let loaded = got, lastReport = 0;
    while (loaded < total) {
      if (io.aborted()) throw abortError();
      const n = Math.min(CHUNK, total - loaded);
      const r = fs.readSync(fd, engine.writeView(n), 0, n, loaded);
      if (r <= 0) throw new WasmlmError('BAD_FILE', `model file ${path} ended at ${loaded} of ${total} bytes (it shrank while being read)`, { file: path });
      engine.advance(r);
      loaded += r;
      if (io.progress && (loaded === total || loaded - lastReport >= CHUNK)) { lastReport = loaded; io.progress(loaded, total); }
    }
    if (io.progress && loaded === got) io.progress(loaded, total);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A readable for a non-regular file. A FIFO is opened non-blocking (a
 * blocking open waits for a writer, freezing the worker beyond the reach of
 * abort and dispose) and read through the event loop, which waits for a
 * writer without blocking; devices are read through a file stream.
 */
function openStream(io, path, st) {
  if (st.isFIFO()) {
    const fd = openFd(io.fs, path, io.fs.constants.O_RDONLY | io.fs.constants.O_NONBLOCK);
    return new io.net.Socket({ fd, readable: true, writable: false });
  }
  return io.fs.createReadStream(path, { highWaterMark: 1 << 20 });
}

/** Reads a stream to its end: the first bytes are checked before the engine reserves anything. */
async function readStream(engine, path, src, io) {
  const unsubscribe = io.onAbort(() => src.destroy(abortError()));
  const head = [];
  let headLen = 0, loaded = 0, started = false, lastReport = 0;
  try {
    if (io.aborted()) throw abortError();
    for await (const chunk of src) {
      loaded += chunk.length;
      if (!started) {
        head.push(chunk); headLen += chunk.length;
        if (headLen < 4) continue;
        started = beginStream(engine, path, concat(head, headLen));
      } else {
        engine.write(chunk);
      }
      if (io.progress && loaded - lastReport >= CHUNK) { lastReport = loaded; io.progress(loaded, 0); }
    }
    if (!started) beginStream(engine, path, concat(head, headLen), true);
    if (io.progress) io.progress(loaded, loaded);
  } finally {
    unsubscribe();
    src.destroy();
  }
}

function concat(parts, n) {
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

function beginStream(engine, path, first, atEnd = false) {
  const problem = ggufHeaderProblem(first, atEnd);
  if (problem) throw badFileError(`model file ${path}`, problem);
  engine.beginLoad(0);
  engine.write(first);
  return true;
}
