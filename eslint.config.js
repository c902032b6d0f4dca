// Lint rules for the project's JavaScript (run by `make lint`, part of `make test`).
// The recommended set, plus two habits: no unused variables, and no `_private`
// member reached from outside its object (only `this._x` may touch `_x`).
import js from '@eslint/js';
import globals from 'globals';

/** `a._b` where `a` is not `this`: a private member used from outside its object. `__x` (wasm exports such as __heap_base) is not private. */
export const PRIVATE_ACCESS = "MemberExpression[computed=false][property.name=/^_[^_]/]:not([object.type='ThisExpression'])";

export default [
  { ignores: ['node_modules/**', 'build/**', 'wasm/**', 'test-artifacts/**', 'bench/cache/**', '**/*.min.js'] },
  js.configs.recommended,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'module',
      // the package runs in Node, in pages and in workers of both
      globals: { ...globals.node, ...globals.browser, ...globals.worker },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_$', caughtErrors: 'none', ignoreRestSiblings: true }],
      'no-restricted-syntax': ['error', {
        selector: PRIVATE_ACCESS,
        message: 'private member used from outside its object: give the owner a public method',
      }],
      // today's style: `for await (const _ of it)` to drain an iterator, `for (;;)` loops with breaks, empty catch blocks that mean "ignore"
      'no-constant-condition': ['error', { checkLoops: false }],
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
];
