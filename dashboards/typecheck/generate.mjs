// Writes, for each dashboards/gradgate-<name>.json, a TypeScript module that holds the file's JSON
// text as an object literal `satisfies GradgateDashboard<'<name>'>`, so that `tsc --noEmit` checks
// every field name and type of every dashboard. (Importing the JSON instead would not do: the
// compiler widens its strings and does not flag unknown fields of an imported value.)
// The JSON text starts on the module's first line, so the line numbers of type errors are those
// of the JSON file. The modules go to node_modules/.gradgate-dashboards/, out of the source tree.
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';

const typecheckDir = new URL('./', import.meta.url);
const dashboardsDir = new URL('../', typecheckDir);
const outputDir = new URL('node_modules/.gradgate-dashboards/', typecheckDir);

const files = readdirSync(dashboardsDir)
  .filter((file) => /^gradgate-[a-z0-9-]+\.json$/.test(file))
  .sort();
if (files.length === 0) {
  console.error(`no gradgate-*.json dashboards in ${dashboardsDir.pathname}`);
  process.exit(1);
}

rmSync(outputDir, { recursive: true, force: true });
mkdirSync(outputDir, { recursive: true });
const index = [];
for (const file of files) {
  const stem = file.slice(0, -'.json'.length);
  const name = stem.slice('gradgate-'.length);
  const text = readFileSync(new URL(file, dashboardsDir), 'utf8').trimEnd();
  try {
    JSON.parse(text);
  } catch (error) {
    console.error(`dashboards/${file}: ${error.message}`);
    process.exit(1);
  }
  const module =
    `import type { GradgateDashboard } from '../../gradgate-dashboard'; export default ${text}` +
    ` satisfies GradgateDashboard<'${name}'>;\n` +
    `// Generated from dashboards/${file} by dashboards/typecheck/generate.mjs.\n`;
  writeFileSync(new URL(`${stem}.ts`, outputDir), module);
  index.push(`import './${stem}';`);
}
// check.ts imports this index, so a missing generation step fails the check instead of passing it.
index.push(`export const checked = ${files.length};\n`);
writeFileSync(new URL('index.ts', outputDir), index.join('\n'));
console.log(`generated type checks for ${files.length} dashboards: ${files.join(', ')}`);
