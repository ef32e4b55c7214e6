import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

// The app is served by `zerg serve` (same origin as /api), so no proxy is needed in production.
// `npm run dev` proxies /api to a local `zerg serve` on :8000.
export default defineConfig({
  plugins: [preact()],
  build: {
    target: 'es2020',
    assetsInlineLimit: 0, // no data: URLs for scripts (CSP: self only)
    modulePreload: { polyfill: false }, // no inline polyfill script
    sourcemap: false,
  },
  server: { proxy: { '/api': 'http://127.0.0.1:8000' } },
  test: { environment: 'node' },
});
