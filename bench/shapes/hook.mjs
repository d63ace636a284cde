// Runs a gateway with the ledger prototype of bench/shapes/once-at-close.mjs in place of dist/store/sqlite-ledger-ops.js
// (for measurement only, never in a served store): node --import ./bench/shapes/hook.mjs dist/cli/main.js serve …
// In a duel: npm run bench:duel -- --base HEAD --node-args=--import=./bench/shapes/hook.mjs
import { register } from 'node:module'

register(new URL('./resolve.mjs', import.meta.url))
