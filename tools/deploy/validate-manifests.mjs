#!/usr/bin/env node
// Validates every document of a stream of Kubernetes manifests (e.g. `helm template` output)
// against the API schemas, offline, with the classes of kubernetes-models (built-in kinds) and
// @kubernetes-models/prometheus-operator (ServiceMonitor, PodMonitor, PrometheusRule, ...):
// `new Kind(document).validate()`.
//
//   node tools/deploy/validate-manifests.mjs [FILE | -]        (stdin without FILE)
//
// Exits 1 listing each invalid document (kind/name and the schema's message), each document
// whose apiVersion/kind no package models, and each kind/name defined twice. The schemas check types, formats and required fields;
// they accept fields they do not know.

import { describe, hasTool, readManifests, requireTool, runCheck } from "./lib/manifests.mjs";

// Packages with one module per API group version ("apps/v1", core "v1"), searched in this order.
const MODEL_PACKAGES = ["kubernetes-models", "@kubernetes-models/prometheus-operator"];
const API_VERSION = /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+((alpha|beta)[0-9]+)?$/;

// The model class of apiVersion/kind, or null when no package has it.
function modelOf(apiVersion, kind) {
  if (typeof apiVersion !== "string" || !API_VERSION.test(apiVersion)) return null;
  for (const modelPackage of MODEL_PACKAGES) {
    const groupVersion = `${modelPackage}/${apiVersion}`;
    if (!hasTool(groupVersion)) continue;
    const model = requireTool(groupVersion)[kind];
    if (typeof model === "function") return model;
  }
  return null;
}

runCheck("validate-manifests", () => {
  for (const modelPackage of MODEL_PACKAGES) requireTool(modelPackage);
  const manifests = readManifests(process.argv[2]);
  const problems = [];
  const kinds = new Map();
  const seen = new Set();
  for (const manifest of manifests) {
    const name = describe(manifest);
    const identity = `${manifest.metadata?.namespace ?? ""}/${name}`;
    if (seen.has(identity)) problems.push(`${name}: defined twice`);
    seen.add(identity);
    const Model = modelOf(manifest.apiVersion, manifest.kind);
    if (!Model) {
      problems.push(`${name}: unknown apiVersion/kind ${manifest.apiVersion}/${manifest.kind}`);
      continue;
    }
    try {
      new Model(manifest).validate();
      kinds.set(manifest.kind, (kinds.get(manifest.kind) ?? 0) + 1);
    } catch (error) {
      problems.push(`${name}: ${error.message}`);
    }
  }
  if (!manifests.length) problems.push("no manifests in the input");
  const counts = [...kinds].map(([kind, count]) => `${count} ${kind}`).join(", ");
  return { problems, success: `manifests: ${manifests.length} documents valid (${counts})` };
});
