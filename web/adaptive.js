// Adaptive compute for best-of-N and self-consistency: sample in batches
// and stop once the outcome is settled, so that an easy prompt costs a few
// samples and a hard one up to maxN. Two stopping rules, both Bayesian
// with a uniform prior, both exact for integer counts (no normal
// approximation, so they hold for the small counts where they decide):
//
// Self-consistency (votes): let a and b be the vote counts of the leading
// answer and the runner-up. With a uniform Beta(1, 1) prior on the
// leader's share p among the votes of the two, the posterior is
// Beta(a + 1, b + 1), and the probability that the leader really leads is
//   P(p > 1/2) = P(Binomial(a + b + 1, 1/2) <= a),
// a binomial tail (the beta-binomial identity for integer parameters).
// Sampling stops when it reaches `confidence`. Votes for other answers and
// samples without an answer do not count: the question is only whether
// the runner-up could overtake the leader. (Adaptive-Consistency, Aggarwal
// et al. 2023, stops on the same posterior; a Bayesian posterior needs no
// correction for being looked at after every batch, unlike a fixed-level
// sequential test.) 4 unanimous votes give 0.969, 3 to 1 give 0.812, 6 to
// 2 give 0.910, 9 to 3 give 0.954.
//
// Best-of-N (scores): the question is whether the next batch of `batch`
// candidates would score above the best so far. Let k be the candidates
// drawn since the best one (those that did not beat it, ties included).
// With a uniform prior on q, the chance that a candidate beats it, the
// posterior after k failures is Beta(1, k + 1), and
//   P(none of the next `batch` beats it) = (k + 1) / (k + 1 + batch).
// Sampling stops when that reaches `confidence`, or at once when the best
// score reaches `target` (a score that cannot be beaten: a verifier's
// "pass"). Without a target this rule is cautious by design: to be 95 %
// sure that 4 more candidates would not do better takes 75 candidates
// after the best; it adapts when a target is given or scores tie at the top.

import { badOption } from './errors.js';

export const ADAPTIVE_DEFAULTS = Object.freeze({ minN: 4, maxN: 32, confidence: 0.95 });

/** P(Binomial(n, 1/2) <= a): the binomial coefficients summed exactly (BigInt), then one division. */
export function binomialHalfCdf(a, n) {
  if (a < 0) return 0;
  if (a >= n) return 1;
  let c = 1n, sum = 1n;
  const N = BigInt(n);
  for (let k = 1n; k <= BigInt(a); k++) { c = c * (N - k + 1n) / k; sum += c; }
  return Number((sum << 53n) >> N) / 2 ** 53;
}

/** The probability that the leader (a votes) leads the runner-up (b votes): P(Beta(a+1, b+1) > 1/2). */
export function voteConfidence(a, b) {
  return binomialHalfCdf(a, a + b + 1);
}

/** The probability that none of the next `batch` candidates beats the best, after `k` that did not. */
export function survivalConfidence(k, batch) {
  return (k + 1) / (k + 1 + batch);
}

/** The adaptive options with their defaults; batch defaults to minN. Throws BAD_OPTION (maxN < minN). */
export function adaptiveOptions(a) {
  const o = { ...ADAPTIVE_DEFAULTS, ...a };
  if (a.maxN === undefined && o.maxN < o.minN) o.maxN = o.minN;
  if (o.maxN < o.minN) throw badOption('adaptive.maxN', o.maxN, `must be at least minN (${o.minN})`);
  o.batch = a.batch ?? o.minN;
  return o;
}

/** Where the votes stand, from the answers' vote counts: {a, b, confidence} (the leader's and the runner-up's counts). */
export function voteState(counts) {
  let a = 0, b = 0;
  for (const c of counts) { if (c > a) { b = a; a = c; } else if (c > b) b = c; }
  return { a, b, confidence: a === 0 ? 0 : voteConfidence(a, b) };
}

/**
 * Where best-of-N stands: `scores` in candidate order. Returns {best,
 * since, confidence}: `since` the candidates after the first one that
 * reached the best score.
 */
export function bestState(scores, batch, target) {
  let best = -Infinity, at = -1;
  scores.forEach((s, i) => { if (at < 0 || s > best) { best = s; at = i; } });
  if (at < 0) return { best, since: 0, confidence: 0 };
  const since = scores.length - 1 - at;
  const reached = target !== undefined && best >= target;
  return { best, since, confidence: reached ? 1 : survivalConfidence(since, batch), reached };
}
