// The stylesheet is bundled by esbuild (server/console/bundle.ts); importing it yields nothing.
declare module '*.css';
