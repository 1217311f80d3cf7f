#!/usr/bin/env node
// Checks the pods of a stream of Kubernetes manifests (e.g. `helm template` output) for the
// chart's baseline: no privileged container, every container (init containers included) runs as
// non-root (runAsNonRoot true in its own or its pod's securityContext, and no runAsUser 0),
// every container requests CPU and memory, and no pod gets Service environment variables
// (enableServiceLinks: false: a Service named like a configuration section, as a release
// "gradgate-dpdk" makes, would give the binaries GRADGATE_DPDK_..., an unknown key to them).
//
//   node tools/deploy/check-pod-security.mjs [FILE | -]        (stdin without FILE)
//
// Exits 1 listing each container that breaks a rule.

import { describe, podSpecOf, readManifests, runCheck } from "./lib/manifests.mjs";

// The problems of one container, given its pod's securityContext.
function containerProblems(container, podSecurity) {
  const security = container.securityContext ?? {};
  const problems = [];
  if (security.privileged === true) problems.push("is privileged");
  const runAsNonRoot = security.runAsNonRoot ?? podSecurity.runAsNonRoot;
  const runAsUser = security.runAsUser ?? podSecurity.runAsUser;
  if (runAsNonRoot !== true) problems.push("does not set runAsNonRoot: true");
  if (runAsUser === 0) problems.push("runs as user 0");
  for (const resource of ["cpu", "memory"]) {
    if (container.resources?.requests?.[resource] === undefined) {
      problems.push(`requests no ${resource}`);
    }
  }
  return problems;
}

runCheck("check-pod-security", () => {
  const problems = [];
  let pods = 0;
  let containers = 0;
  for (const manifest of readManifests(process.argv[2])) {
    const pod = podSpecOf(manifest);
    if (!pod) continue;
    pods += 1;
    if (pod.enableServiceLinks !== false) {
      problems.push(`${describe(manifest)}: does not set enableServiceLinks: false`);
    }
    const podSecurity = pod.securityContext ?? {};
    for (const field of ["initContainers", "containers", "ephemeralContainers"]) {
      for (const container of pod[field] ?? []) {
        containers += 1;
        for (const problem of containerProblems(container, podSecurity)) {
          problems.push(`${describe(manifest)}: ${field} ${container.name} ${problem}`);
        }
      }
    }
  }
  if (!pods) problems.push("no pods in the input");
  const summary = `${containers} containers in ${pods} pods`;
  return {
    problems,
    success: `pod security: ${summary} unprivileged, non-root, with requests, no service links`,
  };
});
