// Bundles the UI (src/main.ts and the CSS it imports) into one JS and one CSS file whose names
// carry a hash of their content, and index.html naming them (esbuild; no network).
//   node build.mjs [--outdir DIR]        (default: web/dist)
// CMake runs it with --outdir <build>/src/webui/assets; src/webui embeds that folder into the
// binary, which serves the hashed files as immutable and index.html as no-cache.
import * as esbuild from "esbuild";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const outIndex = args.indexOf("--outdir");
const outdir = resolve(outIndex >= 0 ? args[outIndex + 1] : join(here, "dist"));
mkdirSync(outdir, { recursive: true });
for (const f of readdirSync(outdir)) rmSync(join(outdir, f), { recursive: true, force: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.ts") },
  entryNames: "[name]-[hash]",
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir,
  metafile: true,
  logLevel: "warning",
  legalComments: "none",
});
const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outputs.find((f) => f.endsWith(".js"));
const css = outputs.find((f) => f.endsWith(".css"));
if (!js || !css) throw new Error(`esbuild wrote ${outputs.join(", ")}: expected one .js and one .css`);
const html = readFileSync(join(here, "index.html"), "utf8")
  .replace("/assets/app.css", `/assets/${css}`)
  .replace("/assets/app.js", `/assets/${js}`);
writeFileSync(join(outdir, "index.html"), html);
