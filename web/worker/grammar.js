// Grammar-constrained decoding in the worker (docs/grammar.md). The C side
// (src/grammar.c, src/grammar_mask.c) compiles GBNF against the model's
// vocabulary and keeps the recognizer states; here are the engine's cache
// of compiled grammars (keyed by their text: a second request with the same
// grammar does not compile again) and one output stream's recognizer state.
import { WasmlmError, EngineError } from '../errors.js';
import { encodeUtf8Into } from './text.js';

const CACHED = 4;      // compiled grammars kept per engine (least recently used dropped)
const NO_EOG = 1;      // WLM_GRAMMAR_NO_EOG

/** The compiled grammars of one engine and the vocabulary trie they share. */
export class Grammars {
  constructor(eng) {
    this.eng = eng;
    this.gvocab = 0;
    this.cache = new Map();   // text -> Grammar, least recently used first
  }

  /** The compiled grammar of `text` (compiled on first use). A grammar
   * that does not parse or check is BAD_OPTION naming `grammar`. */
  get(text) {
    const hit = this.cache.get(text);
    this.lastHit = !!hit;
    if (hit) { this.cache.delete(text); this.cache.set(text, hit); return hit; }
    const eng = this.eng, x = eng.x;
    this.lastTrieMs = 0;
    if (!this.gvocab) {
      const t = now();
      eng.clearError();
      eng.setPtr(eng.at('ptr'), 0);
      eng.check(x.wlm_gvocab_new(eng.at('ptr'), eng.model, eng.at('err')), 'grammar: vocabulary trie');
      this.gvocab = eng.getPtr(eng.at('ptr'));
      this.lastTrieMs = now() - t;
    }
    const need = text.length * 3 + 1;
    const p = eng.block('grammarText', need, (cap) => Math.max(need, 4096, cap * 2));
    const { written } = encodeUtf8Into(text, eng.u8.subarray(p, p + eng.blocks.grammarText.cap));
    eng.clearError();
    eng.setPtr(eng.at('ptr'), 0);
    const t0 = now();
    const st = x.wlm_grammar_compile(eng.at('ptr'), this.gvocab, p, written, eng.at('err'));
    if (st === 1) throw new WasmlmError('BAD_OPTION', `option grammar: ${eng.errorMessage(st).replace(/^grammar: /, '')}`, { option: 'grammar' });
    eng.check(st, 'grammar');
    const g = new Grammar(eng, eng.getPtr(eng.at('ptr')), now() - t0);
    this.cache.set(text, g);
    while (this.cache.size > CACHED) {
      const [oldest, old] = this.cache.entries().next().value;
      if (old.live) break;     // in use by a running generation: kept until later
      this.cache.delete(oldest);
      old.dispose();
    }
    return g;
  }

  /** Frees every grammar and the trie (before the model goes). */
  free() {
    for (const g of this.cache.values()) g.dispose();
    this.cache.clear();
    if (this.gvocab) this.eng.x.wlm_gvocab_free(this.gvocab);
    this.gvocab = 0;
  }
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/** One compiled grammar (a pointer into the engine) and its recognizer states. */
export class Grammar {
  constructor(eng, ptr, compileMs) {
    this.eng = eng; this.ptr = ptr; this.compileMs = compileMs;
    this.live = 0;   // states in use
  }
  dispose() { if (this.ptr) this.eng.x.wlm_grammar_free(this.ptr); this.ptr = 0; }

  /** A new recognizer state at the start of the grammar (or a copy of `from`). */
  newState(from = -1) {
    const eng = this.eng;
    eng.clearError();
    eng.check(eng.x.wlm_grammar_state_new(this.ptr, eng.at('len'), eng.at('err')), 'grammar');
    const s = eng.dv.getUint32(eng.at('len'), true);
    this.live++;
    if (from >= 0) eng.check(eng.x.wlm_grammar_state_copy(this.ptr, s, from, eng.at('err')), 'grammar');
    return s;
  }
  freeState(s) { if (s >= 0 && this.ptr) { this.eng.x.wlm_grammar_state_free(this.ptr, s); this.live--; } }

  /** Advances state `s` by a sampled token (one the mask allowed: a refusal is a bug). */
  accept(s, token) {
    const eng = this.eng;
    eng.clearError();
    const st = eng.x.wlm_grammar_accept(this.ptr, s, token, eng.at('err'));
    if (st !== 0) throw new WasmlmError('INTERNAL', `grammar: the sampled token ${token} was refused: ${eng.errorMessage(st)}`);
  }
  /** Advances state `s` by the UTF-8 of `text`; false when the grammar refuses it (the state is unchanged). */
  acceptText(s, text) {
    const eng = this.eng;
    const need = text.length * 3 + 1;
    const p = eng.block('grammarText', need, (cap) => Math.max(need, 4096, cap * 2));
    const { written } = encodeUtf8Into(text, eng.u8.subarray(p, p + eng.blocks.grammarText.cap));
    eng.clearError();
    const st = eng.x.wlm_grammar_accept_bytes(this.ptr, s, p, written, eng.at('err'));
    if (st === 1) return false;
    eng.check(st, 'grammar');
    return true;
  }
  canEnd(s) { return this.eng.x.wlm_grammar_can_end(this.ptr, s) !== 0; }

  /**
   * The allowed tokens of state `s`: {allow: the bitset's address, n: allowed
   * tokens other than end-of-generation ones, canEnd}. With noEog the
   * end-of-generation tokens are left out (ignoreEos).
   */
  mask(s, noEog = false) {
    const eng = this.eng;
    eng.clearError();
    const st = eng.x.wlm_grammar_mask(this.ptr, s, noEog ? NO_EOG : 0, eng.at('ptr'), eng.at('nOut'), eng.at('err'));
    if (st !== 0) throw new EngineError(`grammar: ${eng.errorMessage(st)}`, st);
    return { allow: eng.getPtr(eng.at('ptr')), n: eng.dv.getUint32(eng.at('nOut'), true), canEnd: this.canEnd(s) };
  }
}

/**
 * One output stream's grammar state. before() is called before each
 * sample: it returns the allowed-token bitset's address, or sets `end` to
 * why the stream ends there: 'stop' when the text is a complete sentence
 * and nothing else may follow, 'grammar' at a dead end (no token of the
 * vocabulary continues it). after(token) follows a sampled token.
 */
export class GrammarState {
  constructor(grammar, noEog, from = null) {
    this.g = grammar; this.noEog = noEog;
    this.s = grammar.newState(from ? from.s : -1);
    this.end = null;
  }
  before() {
    const m = this.g.mask(this.s, this.noEog);
    // nothing but end-of-generation may follow: complete ('stop', ended
    // here without drawing the end token) or a dead end ('grammar')
    if (m.n === 0) { this.end = m.canEnd ? 'stop' : 'grammar'; return 0; }
    return m.allow;
  }
  after(token) { if (!this.g.eng.isEog(token)) this.g.accept(this.s, token); }
  fork() { return new GrammarState(this.g, this.noEog, this); }
  free() { if (this.s >= 0) this.g.freeState(this.s); this.s = -1; }
}
