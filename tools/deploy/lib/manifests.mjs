// What the manifest checks share: their npm packages, found in the tools cache that
// install-tools.sh fills (GRADGATE_DEPLOY_TOOLS, default build/deploy-tools), and reading a stream
// of Kubernetes manifests (the YAML documents `helm template` prints) from a file or stdin.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const toolsDir = path.resolve(
  process.env.GRADGATE_DEPLOY_TOOLS ?? path.join(repositoryRoot, "build", "deploy-tools"),
);

// The packages are CommonJS builds (kubernetes-models ships both), so require() from the cache
// works on every Node.js from 18 on.
const requireFromTools = createRequire(path.join(toolsDir, "package.json"));

// Tells whether the tools cache has an entry point for `name` (a package or one of its subpaths).
export function hasTool(name) {
  try {
    requireFromTools.resolve(name);
    return true;
  } catch (error) {
    if (["MODULE_NOT_FOUND", "ERR_PACKAGE_PATH_NOT_EXPORTED"].includes(error.code)) return false;
    throw error;
  }
}

// Loads an npm package of the tools cache; a missing one is reported with the command to run.
export function requireTool(name) {
  if (!hasTool(name)) {
    throw new Error(`${name} is not in ${toolsDir}: run tools/deploy/install-tools.sh ${toolsDir}`);
  }
  return requireFromTools(name);
}

// The documents of a YAML stream in FILE ("-" or no FILE: stdin), as plain objects; empty documents
// (helm prints one per template that renders nothing) are dropped. Throws on a syntax error.
export function readManifests(file) {
  const YAML = requireTool("yaml");
  const text = readFileSync(file && file !== "-" ? file : 0, "utf8");
  const manifests = [];
  for (const document of YAML.parseAllDocuments(text)) {
    if (document.errors.length) {
      throw new Error(`${file ?? "stdin"}: ${document.errors.map((e) => e.message).join("; ")}`);
    }
    const manifest = document.toJS();
    if (manifest !== null && manifest !== undefined) manifests.push(manifest);
  }
  return manifests;
}

// "Kind/name" of a manifest, for messages.
export function describe(manifest) {
  return `${manifest?.kind ?? "(no kind)"}/${manifest?.metadata?.name ?? "(no name)"}`;
}

// The pod spec of a manifest that runs pods (Pod, the workload controllers, Job, CronJob), or null.
export function podSpecOf(manifest) {
  switch (manifest?.kind) {
    case "Pod":
      return manifest.spec ?? null;
    case "CronJob":
      return manifest.spec?.jobTemplate?.spec?.template?.spec ?? null;
    case "Deployment":
    case "DaemonSet":
    case "StatefulSet":
    case "ReplicaSet":
    case "ReplicationController":
    case "Job":
      return manifest.spec?.template?.spec ?? null;
    default:
      return null;
  }
}

// Runs a check: `check()` returns its problems and the line to print when there are none. Prints
// each problem (or the error that stopped the check) prefixed with the check's name and exits 1.
export function runCheck(name, check) {
  try {
    const { problems, success } = check();
    if (!problems.length) {
      console.log(success);
      return;
    }
    for (const problem of problems) console.error(`${name}: ${problem}`);
  } catch (error) {
    console.error(`${name}: ${error.message}`);
  }
  process.exit(1);
}
