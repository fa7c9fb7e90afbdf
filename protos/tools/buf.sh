#!/usr/bin/env bash
# buf without a buf install: the binary ships in npm's @bufbuild/buf-linux-x64 (the platform package
# @bufbuild/buf depends on). Fetched once with `npm pack`, cached outside the repo, then exec'd.
#
#   (cd protos && tools/buf.sh ARGS...)  run buf (`lint`, `breaking --against ...`) on the module there
#   protos/tools/buf.sh --print-path     print the cached binary's path (fetching it if needed)
set -euo pipefail
version=1.75.0  # pinned: a new buf release must not change what lint accepts under our tests
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) echo "buf.sh: no @bufbuild/buf package for $(uname -m)" >&2; exit 2 ;;
esac
package="@bufbuild/buf-linux-$arch@$version"
cache=${HYBRIDSEARCH_BUF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hybridsearch/buf}/$version-$arch
buf=$cache/buf

if [[ ! -x $buf ]]; then
  command -v npm >/dev/null || { echo "buf.sh: npm is required to fetch $package" >&2; exit 127; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "buf.sh: fetching buf from $package (once; cached in $cache)" >&2
  (cd "$work" && npm pack --silent "$package" >/dev/null 2>&1) || { echo "buf.sh: npm pack $package failed" >&2; exit 1; }
  tar -xzf "$work"/*.tgz -C "$work" package/bin/buf
  mkdir -p "$cache"
  install -m 0755 "$work/package/bin/buf" "$buf"
fi

if [[ ${1:-} == --print-path ]]; then
  echo "$buf"
  exit 0
fi
exec "$buf" "$@"
