#!/usr/bin/env bash
# The deployment checks, run after the build (CI and `./gradgate.sh test`): the Helm chart
# (helm/gradgate), the Grafana dashboards and alert rules (dashboards/) and the runtime package list
# of the container image. Each step prints one line; the first that fails prints what it saw and
# stops the script with exit status 1.
#
#   tools/deploy/check-deploy.sh
#
# Environment: GRADGATE_BINARY (default build/cli/gradgate) the built binary;
# GRADGATE_DEPLOY_TOOLS (default build/deploy-tools) the tools cache (install-tools.sh).
# Needs the packages of tools/packages/deploy.txt and, once, the npm registry.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/../.."

readonly CHART=helm/gradgate
readonly RELEASE=gradgate
readonly BINARY=${GRADGATE_BINARY:-build/cli/gradgate}
GRADGATE_DEPLOY_TOOLS=$(mkdir -p "${GRADGATE_DEPLOY_TOOLS:-build/deploy-tools}" &&
  cd "${GRADGATE_DEPLOY_TOOLS:-build/deploy-tools}" && pwd)
export GRADGATE_DEPLOY_TOOLS
readonly HELM=$GRADGATE_DEPLOY_TOOLS/bin/helm

# Values the chart must refuse (its schema, or its templates for combinations), and the message
# helm must give for each.
readonly REJECTED_VALUES=(
  "gateway.ports.transport=abc|gateway\.ports\.transport: Invalid type\. Expected: integer"
  "gateway.config.job.size=-1|gateway\.config\.job\.size: Must be greater than or equal to"
  "gateway.config.logging.level=verbose|gateway\.config\.logging\.level: .*must be one of"
  "controller.config.log.level=verbose|controller\.config\.log\.level: .*must be one of"
  "controller.settings.volume=disk|controller\.settings\.volume: .*must be one of"
  "controller.settings.volume=persistentVolumeClaim|controller\.settings\.claimName: the claim"
  "gateway.config.compression.placement=fast|gateway\.config\.compression\.placement: .*must be one of"
  "gateway.config.collective.segment_bytes=4096|gateway\.config\.collective\.segment_bytes: Must validate at least one schema"
  "dpdk.config.mtu=64|dpdk\.config\.mtu: Must be greater than or equal to 128"
  "dpdk.network.name=SR-IOV|dpdk\.network\.name: Does not match pattern"
  "dpdk.enabled=true,gateway.hostNetwork=true|dpdk\.enabled with gateway\.hostNetwork: Multus"
)

WORK=$(mktemp -d)
readonly WORK
trap 'rm -rf "$WORK"' EXIT
STEP=0

# step TITLE: starts the next step; its line is printed when it passes.
step() {
  STEP=$((STEP + 1))
  TITLE=$1
}

passed() {
  printf '[%2d] ok    %s: %s\n' "$STEP" "$TITLE" "$*"
}

failed() {
  printf '[%2d] FAIL  %s: %s\n' "$STEP" "$TITLE" "$*" >&2
  exit 1
}

# quietly COMMAND...: runs COMMAND with its output kept in $WORK/output; shows it if COMMAND fails.
quietly() {
  "$@" >"$WORK/output" 2>&1 && return 0
  sed 's/^/      /' "$WORK/output" >&2
  return 1
}

# The names of the renders checked: the chart's defaults alone, and each ci/NAME-values.yaml.
value_sets() {
  echo chart-defaults
  local file
  for file in "$CHART"/ci/*-values.yaml; do basename "$file" -values.yaml; done
}

# values_args SET: the helm arguments that select the values of SET.
values_args() {
  [[ $1 == chart-defaults ]] || echo "--values=$CHART/ci/$1-values.yaml"
}

# render SET: the chart rendered with the values set SET, in $WORK/render-SET.yaml.
render() {
  local args
  mapfile -t args < <(values_args "$1")
  "$HELM" template "$RELEASE" "$CHART" --namespace "$RELEASE" "${args[@]}" \
    >"$WORK/render-$1.yaml" 2>"$WORK/output"
}

check_tools() {
  step "tools"
  [[ -x $BINARY ]] || failed "$BINARY is missing: build first (./gradgate.sh build)"
  quietly tools/deploy/install-tools.sh "$GRADGATE_DEPLOY_TOOLS" || failed "install-tools.sh failed"
  passed "$(sed 's/^[^:]*: //' "$WORK/output")"
}

check_yaml_style() {
  step "yamllint"
  local files=("$CHART/values.yaml" "$CHART"/ci/*.yaml dashboards/alerts/*.yaml)
  quietly yamllint --strict -c tools/deploy/.yamllint "${files[@]}" || failed "style errors"
  passed "${#files[@]} files"
}

check_helm_lint() {
  step "helm lint --strict"
  local set args sets=()
  while read -r set; do
    mapfile -t args < <(values_args "$set")
    quietly "$HELM" lint --strict "$CHART" "${args[@]}" || failed "with $set"
    sets+=("$set")
  done < <(value_sets)
  passed "${sets[*]}"
}

check_manifests() {
  step "helm template | validate-manifests.mjs"
  local set summary=()
  while read -r set; do
    render "$set" || { sed 's/^/      /' "$WORK/output" >&2; failed "helm template with $set"; }
    quietly node tools/deploy/validate-manifests.mjs "$WORK/render-$set.yaml" || failed "with $set"
    summary+=("$set: $(grep -o '[0-9]* documents' "$WORK/output")")
  done < <(value_sets)
  passed "$(printf '%s, ' "${summary[@]}" | sed 's/, $//')"
}

check_schema_rejects() {
  step "the chart rejects bad values"
  local case value expected
  for case in "${REJECTED_VALUES[@]}"; do
    value=${case%%|*}
    expected=${case#*|}
    if "$HELM" template "$RELEASE" "$CHART" --set "$value" >/dev/null 2>"$WORK/output"; then
      failed "--set $value was accepted"
    fi
    grep -Eq "$expected" "$WORK/output" || {
      sed 's/^/      /' "$WORK/output" >&2
      failed "--set $value: helm's message does not match /$expected/"
    }
  done
  passed "${#REJECTED_VALUES[@]} values refused with their messages"
}

check_pod_security() {
  step "pod security of the default render"
  quietly node tools/deploy/check-pod-security.mjs "$WORK/render-chart-defaults.yaml" ||
    failed "see above"
  passed "$(sed 's/^[^:]*: //' "$WORK/output")"
}

# The gateway's and the controller's configuration files of each render, with the environment
# their pods give them.
check_configs() {
  step "gradgate validate on the rendered gateway.yaml and control.yaml"
  local set component out environment validate checked=()
  while read -r set; do
    for component in gateway control; do
      out=$WORK/$component-$set
      quietly node tools/deploy/extract-config.mjs "$WORK/render-$set.yaml" "$component" "$out" ||
        failed "$component with $set"
      [[ -f $out/config.yaml ]] || continue  # no controller in this render
      mapfile -t environment <"$out/config.env"
      validate=(validate -c "$out/config.yaml")
      [[ $component == control ]] && validate+=(--control)
      quietly env -i "${environment[@]}" "$BINARY" "${validate[@]}" || failed "$component with $set"
      checked+=("$set:$component")
    done
  done < <(value_sets)
  passed "${checked[*]}"
}

check_alert_rules() {
  step "promtool check rules + test rules"
  local rules=() tests=() file
  for file in dashboards/alerts/*.yaml; do
    if [[ $file == *.test.yaml ]]; then tests+=("$file"); else rules+=("$file"); fi
  done
  ((${#rules[@]} && ${#tests[@]})) || failed "no rules or no rule tests in dashboards/alerts"
  quietly promtool check rules "${rules[@]}" || failed "promtool check rules"
  quietly promtool test rules "${tests[@]}" || failed "promtool test rules"
  passed "${rules[*]} (tests: ${tests[*]})"
}

# In a copy of dashboards/ inside the tools cache (nothing written to the source tree); the npm
# packages are installed again only when package-lock.json changes.
check_dashboard_types() {
  step "dashboards' type check (tsc --noEmit)"
  local copy=$GRADGATE_DEPLOY_TOOLS/dashboards dashboards=(dashboards/*.json)
  ((${#dashboards[@]})) || failed "no dashboards/*.json"
  local lock_sum
  lock_sum=$(sha256sum <dashboards/typecheck/package-lock.json | cut -d' ' -f1)
  if [[ $(cat "$copy/.package-lock.sha256" 2>/dev/null) != "$lock_sum" ]]; then
    rm -rf "$copy"
  fi
  mkdir -p "$copy/typecheck"
  find "$copy" -maxdepth 1 -name '*.json' -delete
  cp "${dashboards[@]}" "$copy/"
  find dashboards/typecheck -maxdepth 1 -type f -exec cp {} "$copy/typecheck/" \;
  if [[ ! -f $copy/.package-lock.sha256 ]]; then
    quietly timeout 600 npm ci --prefix "$copy/typecheck" --no-audit --no-fund ||
      failed "npm ci in a copy of dashboards/typecheck"
    echo "$lock_sum" >"$copy/.package-lock.sha256"
  fi
  quietly timeout 300 npm run --prefix "$copy/typecheck" check || failed "see above"
  passed "${#dashboards[@]} dashboards"
}

check_runtime_packages() {
  step "runtime packages (tools/packages/runtime.txt)"
  quietly tools/deploy/check-runtime-packages.sh "$BINARY" || failed "see above"
  passed "$(sed 's/^[^:]*: //' "$WORK/output")"
}

check_tools
check_yaml_style
check_helm_lint
check_manifests
check_schema_rejects
check_pod_security
check_configs
check_alert_rules
check_dashboard_types
check_runtime_packages
echo "deployment checks passed"
