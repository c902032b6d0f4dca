// UTF-8 between JS strings and wasm memory, shared or not.

// ignoreBOM: a U+FEFF is text like any other (the default drops a leading one
// from every decoded piece, so detokenized and streamed text lost it)
const utf8dec = new TextDecoder('utf-8', { ignoreBOM: true });
const utf8enc = new TextEncoder();
const isShared = (buf) => typeof SharedArrayBuffer !== 'undefined' && buf instanceof SharedArrayBuffer;

/** Decodes UTF-8 bytes. Browsers refuse views of a SharedArrayBuffer (the
 * threaded build's wasm memory) in TextDecoder.decode: a copy is decoded then. */
export function decodeUtf8(view) {
  return utf8dec.decode(isShared(view.buffer) ? view.slice() : view);
}

/** TextEncoder.encodeInto, also for a shared destination (encode, then copy). */
export function encodeUtf8Into(text, dst) {
  if (!isShared(dst.buffer)) return utf8enc.encodeInto(text, dst);
  const bytes = utf8enc.encode(text);
  if (bytes.byteLength > dst.byteLength) throw new RangeError('encodeUtf8Into: destination too small');
  dst.set(bytes);
  return { read: text.length, written: bytes.byteLength };
}
