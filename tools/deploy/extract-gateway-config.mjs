#!/usr/bin/env node
// Takes the gateway's configuration out of a stream of Kubernetes manifests (e.g. `helm template`
// output) as the gateway container would see it, so that `gradgate validate` can check it:
//   OUTDIR/gateway.yaml   the file that `gradgate gateway -c PATH` reads, from the ConfigMap
//                         mounted at PATH
//   OUTDIR/gateway.env    the container's environment, one NAME=VALUE a line, with sample values
//                         for what the downward API gives (pod IP, node name, ...) and $(VAR)
//                         references expanded as the kubelet does
//
//   node tools/deploy/extract-gateway-config.mjs STREAM OUTDIR
//
// Exits 1 when the stream has no single gateway container or its configuration cannot be traced.

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

// The config path of a container that runs `gradgate gateway -c PATH`, or null.
function gatewayConfigPath(container) {
  const words = [...(container.command ?? []), ...(container.args ?? [])];
  const subcommand = words.indexOf("gateway");
  if (subcommand < 0) return null;
  for (let i = subcommand + 1; i < words.length; i += 1) {
    if (["-c", "--config"].includes(words[i])) return words[i + 1] ?? null;
    if (words[i].startsWith("--config=")) return words[i].slice("--config=".length);
  }
  return null;
}

// The single gateway container of the stream: { manifest, pod, container, configPath }.
function findGateway(manifests) {
  const found = [];
  for (const manifest of manifests) {
    const pod = podSpecOf(manifest);
    for (const container of pod?.containers ?? []) {
      const configPath = gatewayConfigPath(container);
      if (configPath) found.push({ manifest, pod, container, configPath });
    }
  }
  if (found.length !== 1) {
    const count = found.length;
    throw new Error(`expected one container running "gradgate gateway -c PATH", found ${count}`);
  }
  return found[0];
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

runCheck("extract-gateway-config", () => {
  const [stream, outDir] = process.argv.slice(2);
  if (!stream || !outDir) throw new Error("usage: extract-gateway-config.mjs STREAM OUTDIR");
  const manifests = readManifests(stream);
  const gateway = findGateway(manifests);
  const env = environment(manifests, gateway);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, "gateway.yaml"), configText(manifests, gateway));
  const lines = [...env].map(([name, value]) => `${name}=${value}\n`);
  writeFileSync(path.join(outDir, "gateway.env"), lines.join(""));
  const source = `${gateway.configPath} of ${describe(gateway.manifest)}`;
  return { problems: [], success: `gateway config: ${source} and ${env.size} variables` };
});
