// The spend/success measurement of issue #32: on the built-in task
// (web/demo/mentions-task.js: continue a story opening so that it mentions
// a word, checked by a verifier), the share of tasks solved against the
// tokens generated per task, for greedy decoding, best-of-N, adaptive
// best-of-N, tree search and deliberate decoding at several settings.
// Counts only (no timings): a seed gives the same tokens on every host, so
// the results do not depend on the machine. Writes
// bench/results/deliberate.{md,svg,json}.
//
//   node bench/deliberate.mjs [--tasks 48] [--quick] [--out deliberate]
import fs from 'node:fs';
import path from 'node:path';
import { root, trained, benchArgs } from './common.mjs';
import { loadModel } from '../web/index.js';
import { mentionTasks, mentionMethods, spendSuccess, spendSuccessSvg, spendSuccessTable, MENTION_SAMPLING, MENTION_PROMPTS, MENTION_WORDS } from '../web/demo/mentions-task.js';

const args = benchArgs();
const tasks = mentionTasks(args.tasks ? +args.tasks : undefined);
const methods = mentionMethods({ quick: !!args.quick });
const out = String(args.out || 'deliberate');
const m = await loadModel(trained, { threads: 1 });
const t0 = Date.now();
const points = await spendSuccess(m, { tasks, methods, onPoint: (p) => console.error('[deliberate]', p.method, p.setting, `${p.solved}/${p.tasks}`, p.tokens.toFixed(1)) });
await m.dispose();
const title = `stories260K: "continue the story so that it mentions WORD" (${tasks.length} tasks)`;
const svg = spendSuccessSvg(points, { title });
let md = `# Spend and success on the built-in task\n\n`;
md += `stories260K, ${tasks.length} tasks: ${MENTION_PROMPTS.length} story openings x ${MENTION_WORDS.length} words (${MENTION_WORDS.join(', ')}); `;
md += `an answer is ${MENTION_SAMPLING.maxTokens} tokens with the default sampling options, seed 100 + task; solved when the verifier finds the word `;
md += `(or its plural) in the continuation. Tokens: generated per task (deliberate: everything it spent, greedy answer included). `;
md += `Counts only, the same on every host (\`node bench/deliberate.mjs\`, web/demo/mentions-task.js).\n\n`;
md += `![success against tokens](${out}.svg)\n\n` + spendSuccessTable(points);
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `${out}.svg`), svg + '\n');
fs.writeFileSync(path.join(root, 'bench', 'results', `${out}.md`), md);
fs.writeFileSync(path.join(root, 'bench', 'results', `${out}.json`), JSON.stringify({ model: 'stories260K', tasks: tasks.length, sampling: MENTION_SAMPLING, points }, null, 2) + '\n');
console.log(md);
console.error(`[deliberate] ${((Date.now() - t0) / 1000).toFixed(1)} s`);
