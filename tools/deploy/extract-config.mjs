#!/usr/bin/env node
// Takes the configuration of the gateway or the controller out of a stream of Kubernetes
// manifests (e.g. `helm template` output) as its container would see it, so that
// `gradgate validate` (`--control` for the controller) can check it:
//   OUTDIR/config.yaml   the file that `gradgate SUBCOMMAND -c PATH` reads, from the ConfigMap
//                        mounted at PATH
//   OUTDIR/config.env    the container's environment, one NAME=VALUE a line, with sample values
//                        for what the downward API gives (pod IP, node name, ...) and $(VAR)
//                        references expanded as the kubelet does
//
//   node tools/deploy/extract-config.mjs STREAM SUBCOMMAND OUTDIR     (SUBCOMMAND: gateway|control)
//
// Exits 1 when the stream has more than one such container, no gateway container, or a
// configuration that cannot be traced. A stream without a controller (controller.enabled false)
// writes nothing for `control` and says so.

import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, podSpecOf, readManifests, runCheck } from "./lib/manifests.mjs";

// What the downward API would give a gateway pod on a node of the cluster.
const SAMPLE_FIELDS = {
  "metadata.name": "gradgate-gateway-x7k2p",
  "metadata.namespace": "gradgate",
  "spec.nodeName": "gpu-node-0",
  "spec.serviceAccountName": "gradgate",
  "status.hostIP": "10.0.0.10",
  "status.podIP": "10.244.1.17",
};
const SAMPLE_SECRET_VALUE = "sample-secret-value";

// The config path of a container that runs `gradgate SUBCOMMAND -c PATH`, or null.
function configPathOf(container, subcommandName) {
  const words = [...(container.command ?? []), ...(container.args ?? [])];
  const subcommand = words.indexOf(subcommandName);
  if (subcommand < 0) return null;
  for (let i = subcommand + 1; i < words.length; i += 1) {
    if (["-c", "--config"].includes(words[i])) return words[i + 1] ?? null;
    if (words[i].startsWith("--config=")) return words[i].slice("--config=".length);
  }
  return null;
}

// The containers of the stream that run `gradgate SUBCOMMAND -c PATH`:
// [{ manifest, pod, container, configPath }].
function findContainers(manifests, subcommand) {
  const found = [];
  for (const manifest of manifests) {
    const pod = podSpecOf(manifest);
    for (const container of pod?.containers ?? []) {
      const configPath = configPathOf(container, subcommand);
      if (configPath) found.push({ manifest, pod, container, configPath });
    }
  }
  return found;
}

// The text of the file at configPath in the container: the ConfigMap key mounted there.
function configText(manifests, { manifest, pod, container, configPath }) {
  for (const mount of container.volumeMounts ?? []) {
    const mountPath = mount.mountPath.replace(/\/$/, "");
    let file;
    if (mount.subPath) {
      if (configPath !== mountPath) continue;
      file = mount.subPath;
    } else if (configPath.startsWith(`${mountPath}/`)) {
      file = configPath.slice(mountPath.length + 1);
    } else {
      continue;
    }
    const volume = (pod.volumes ?? []).find((v) => v.name === mount.name);
    if (!volume?.configMap) {
      throw new Error(`${describe(manifest)}: ${configPath} is not mounted from a ConfigMap`);
    }
    const item = (volume.configMap.items ?? []).find((i) => i.path === file);
    const key = volume.configMap.items ? item?.key : file;
    const configMap = manifests.find(
      (m) => m.kind === "ConfigMap" && m.metadata?.name === volume.configMap.name,
    );
    const text = key === undefined ? undefined : configMap?.data?.[key];
    if (text === undefined) {
      throw new Error(`ConfigMap ${volume.configMap.name} has no key for ${file} (${configPath})`);
    }
    return text;
  }
  throw new Error(`${describe(manifest)}: no volume mount provides ${configPath}`);
}

// The value of one env entry; `earlier` holds the entries before it for $(VAR) expansion.
function envValue(entry, earlier, manifests) {
  if (entry.value !== undefined) {
    return String(entry.value).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name) =>
      match === "$$" ? "$" : (earlier.get(name) ?? match),
    );
  }
  const { fieldRef, secretKeyRef, configMapKeyRef } = entry.valueFrom ?? {};
  if (fieldRef) {
    const value = SAMPLE_FIELDS[fieldRef.fieldPath];
    if (value === undefined) {
      throw new Error(`env ${entry.name}: no sample value for ${fieldRef.fieldPath}`);
    }
    return value;
  }
  if (secretKeyRef) return SAMPLE_SECRET_VALUE;
  if (configMapKeyRef) {
    const configMap = manifests.find(
      (m) => m.kind === "ConfigMap" && m.metadata?.name === configMapKeyRef.name,
    );
    const value = configMap?.data?.[configMapKeyRef.key];
    if (value === undefined) {
      const { name, key } = configMapKeyRef;
      throw new Error(`env ${entry.name}: ConfigMap ${name} has no key ${key}`);
    }
    return value;
  }
  return "";
}

function environment(manifests, { manifest, container }) {
  if (container.envFrom?.length) {
    throw new Error(`${describe(manifest)}: envFrom is not traced by this check`);
  }
  const values = new Map();
  for (const entry of container.env ?? []) {
    const value = envValue(entry, values, manifests);
    if (value.includes("\n")) throw new Error(`env ${entry.name}: a value of several lines`);
    values.set(entry.name, value);
  }
  return values;
}

runCheck("extract-config", () => {
  const [stream, subcommand, outDir] = process.argv.slice(2);
  if (!stream || !["gateway", "control"].includes(subcommand) || !outDir) {
    throw new Error("usage: extract-config.mjs STREAM gateway|control OUTDIR");
  }
  const manifests = readManifests(stream);
  const found = findContainers(manifests, subcommand);
  if (found.length === 0 && subcommand === "control") {
    return { problems: [], success: 'no container runs "gradgate control"' };
  }
  if (found.length !== 1) {
    const count = found.length;
    throw new Error(`expected one container running "gradgate ${subcommand} -c PATH", found ${count}`);
  }
  const [component] = found;
  const env = environment(manifests, component);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, "config.yaml"), configText(manifests, component));
  const lines = [...env].map(([name, value]) => `${name}=${value}\n`);
  writeFileSync(path.join(outDir, "config.env"), lines.join(""));
  const source = `${component.configPath} of ${describe(component.manifest)}`;
  return { problems: [], success: `${subcommand} config: ${source} and ${env.size} variables` };
});
