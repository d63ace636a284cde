import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

/** The account portal's front end: plain TypeScript and DOM, bundled into dist/web and served by the gateway at /portal. */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/portal/',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // The page's CSP allows scripts from this origin only; no inline polyfill.
    modulePreload: { polyfill: false },
    sourcemap: true,
    chunkSizeWarningLimit: 300,
  },
})
