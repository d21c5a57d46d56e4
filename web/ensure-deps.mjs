// Runs `npm ci` in web/ unless node_modules already holds what package-lock.json names (a stamp
// with the lock file's hash, written after a successful `npm ci`). So a rebuild, another build
// folder or an offline machine with node_modules in place never reaches the registry.
//   node ensure-deps.mjs [--stamp FILE]   (FILE is touched when done: the build's dependency)
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const lock = readFileSync(join(here, "package-lock.json"));
const want = createHash("sha256").update(lock).digest("hex");
const stampInModules = join(here, "node_modules", ".sediment-lock-sha256");
const have = existsSync(stampInModules) ? readFileSync(stampInModules, "utf8").trim() : "";
if (have !== want) {
  console.log("web: npm ci (package-lock.json changed or node_modules missing)");
  execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: here, stdio: "inherit" });
  writeFileSync(stampInModules, want + "\n");
}
const i = process.argv.indexOf("--stamp");
if (i >= 0) writeFileSync(process.argv[i + 1], want + "\n");
