#!/usr/bin/env bash
# `make test-cluster`: installs charts/hybridsearch on a real Kubernetes v1.20.2 API server (etcd,
# kube-apiserver, controller-manager, scheduler, kubemark hollow nodes; ../shared/tools/k8s-1.20)
# and checks install, upgrade, rollback, rejected values files and uninstall. See docs/cluster.md.
#
# Runs as root. Helm is fetched first (npm: needs the network); then the script re-executes itself
# inside `unshare -n`, because hollow nodes hand every pod a private-range IP and probe it.
#
# Environment: K8S_TOOLS (cluster.sh's folder), K8S_HOME (its binaries, ~/.cache/k8s-1.20),
# CHART (default charts/hybridsearch), VALUES_HOLLOW (the values for hollow nodes), HELM (a helm
# binary instead of charts/tools/helm.sh's), HELM_WAIT (helm's --wait strategy, default legacy: see
# below). A failed run keeps the cluster's logs, says where, and ends with a short summary of what
# was not ready (CI shows only the tail of the output).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/cluster
K8S_TOOLS=${K8S_TOOLS:-$ROOT/../shared/tools/k8s-1.20}
export K8S_HOME=${K8S_HOME:-$HOME/.cache/k8s-1.20}
CHART=${CHART:-$ROOT/charts/hybridsearch}
# The chart's own values for hollow nodes (tiny requests: each reports 1 CPU and 3.75 GiB). Its
# triton.gpu=0 is overridden: the GPU node below gives Triton its production setting, gpu=1.
VALUES_HOLLOW=${VALUES_HOLLOW:-$CHART/ci/hollow-nodes-values.yaml}
RELEASE=hs
NS=hybridsearch
NODES=2
SELECTOR="app.kubernetes.io/instance=$RELEASE"

# What the upgrade changes and the rollback restores, each checked on the live object:
# a Deployment's replica count, an environment variable of another's pods, an HPA's floor.
UP_REPLICAS_COMPONENT=triton UP_REPLICAS_KEY=triton.replicas UP_REPLICAS=2
UP_ENV_COMPONENT=gateway UP_ENV=HYBRIDSEARCH_LOG_LEVEL UP_ENV_VALUE=DEBUG
UP_HPA_COMPONENT=gateway UP_HPA_KEY=gateway.autoscaling.minReplicas UP_HPA_MIN=3
# One hollow node plays a GPU node: it advertises this many nvidia.com/gpu and carries the usual GPU
# taint, so Triton installs with its production setting (triton.gpu=1) and must land there.
GPU_NODE=node-$NODES GPUS=2

# helm 4's default --wait strategy ("watcher", kstatus over watch streams) has known full-timeout hangs
# upstream; "legacy" is helm 3's polling waiter, which 1.20 was built for. (The CI timeout that prompted
# this was the hollow nodes' shared runtime socket, fixed below.) The script's own poll
# (assert_release_running) checks readiness independently of either.
HELM_WAIT=${HELM_WAIT:-legacy}

log() { printf '\n== %s [%ss]\n' "$*" "$SECONDS"; }
ok() { printf 'PASS %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*" >&2; failure="$*"; exit 1; }
failure=""

# --- outside the namespace: everything that needs the network ----------------------------------
if [[ -z ${HS_CLUSTER_INNER:-} ]]; then
  [[ $(id -u) -eq 0 ]] || fail "run as root: the cluster runs inside 'unshare -n'"
  [[ -x $K8S_HOME/bin/kube-apiserver && -x $K8S_HOME/bin/kubemark ]] \
    || fail "no Kubernetes binaries in $K8S_HOME/bin: run $K8S_TOOLS/build.sh (about 6-10 min, once)"
  [[ -f $CHART/Chart.yaml ]] || fail "no chart at $CHART"
  [[ -f $VALUES_HOLLOW ]] || fail "no values file for hollow nodes at $VALUES_HOLLOW"
  if [[ -z ${HELM:-} ]]; then
    if [[ -x $ROOT/charts/tools/helm.sh ]]; then
      HELM=$("$ROOT/charts/tools/helm.sh" --print-path)
    else
      HELM=$("$HERE/get-helm.sh")
    fi
  fi
  [[ -x $HELM ]] || fail "no helm binary at '$HELM'"
  # kubectl: the system one (Debian kubernetes-client), else the one beside helm in the npm layer.
  if ! command -v kubectl >/dev/null; then
    PATH=$(cd "$(dirname "$("$HERE/get-helm.sh")")/../kubectl" && pwd):$PATH
  fi
  echo "helm $("$HELM" version --short) ($HELM); kubectl $(command -v kubectl)"
  export HELM PATH CHART VALUES_HOLLOW HS_CLUSTER_INNER=1
  exec unshare -n -- "$0" "$@"
fi

# --- inside a private network namespace ---------------------------------------------------------
# A private cluster home (cluster.sh keeps its state in $K8S_HOME/run): runs do not share etcd data,
# kubeconfig or pid files. (Node-1 of every run uses the host's /tmp/kubelet_remote.sock: one run at a time.)
# Not under /tmp: hollow nodes after the first get a private /tmp (below), and must still see this folder.
RUN_HOME=$(mktemp -d "${XDG_CACHE_HOME:-$HOME/.cache}/hybridsearch-cluster.XXXXXX")
ln -s "$K8S_HOME/bin" "$RUN_HOME/bin"
export K8S_HOME=$RUN_HOME KUBECONFIG=$RUN_HOME/run/kubeconfig
# helm's own state stays with the throwaway cluster, away from the user's real clusters' settings.
export HELM_CACHE_HOME=$RUN_HOME/helm/cache HELM_CONFIG_HOME=$RUN_HOME/helm/config HELM_DATA_HOME=$RUN_HOME/helm/data
helm() { "$HELM" "$@"; }
# The waiting commands: helm's --debug log (which resource a wait is stuck on; its errors too) goes to
# a file, which the failure summary quotes.
helm_waiting() { "$HELM" --debug "$@" 2>>"$RUN_HOME/helm-debug.log"; }
k() { kubectl --request-timeout=20s "$@"; }

cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "--- state at failure ---"
    k get nodes -o wide 2>&1 || true
    k get deploy,rs,pods,svc,hpa,pdb -n "$NS" -o wide 2>&1 || true
    k get events -A --sort-by=.metadata.creationTimestamp 2>&1 | grep -v 'FailedGetResourceMetric\|FailedComputeMetricsReplicas' | tail -25 || true
    failure_summary || true   # in an || list: set -e is off inside, so a grep that finds nothing cannot skip the teardown
  fi
  log "cluster down"
  "$K8S_TOOLS/cluster.sh" down || true
  if [[ $rc -eq 0 ]]; then rm -rf "$RUN_HOME"; else echo "the cluster's logs: $RUN_HOME/run/*.log"; fi
  if [[ $rc -eq 0 ]]; then echo "ALL PASSED in ${SECONDS}s"; else echo "FAILED (exit $rc) after ${SECONDS}s"; fi
  exit $rc
}
# At most ~20 lines, printed last: what failed, the control plane's processes, nodes, pods that are not
# Running+Ready, what helm's waiter was waiting for, and the components' last errors.
failure_summary() {
  local pid name f
  echo "--- summary ---"
  echo "failed: ${failure:-a command exited non-zero (see above)}"
  # cluster.sh starts etcd, kube-apiserver, the controller-manager, the scheduler, then the hollow nodes.
  if [[ -f $RUN_HOME/run/pids ]]; then
    local names=(etcd apiserver controller-manager scheduler) i=0
    for pid in $(cat "$RUN_HOME/run/pids"); do
      name=${names[$i]:-node-$((i - 3))}; i=$((i + 1))
      if kill -0 "$pid" 2>/dev/null; then printf '%s up; ' "$name"; else printf '%s EXITED; ' "$name"; fi
    done; echo
  fi
  k get nodes --no-headers -o custom-columns='N:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,TAINTS:.spec.taints[*].key' 2>&1 | paste -sd';' - || true
  k get pods -n "$NS" --no-headers -o custom-columns='POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,READY:.status.conditions[?(@.type=="Ready")].status,WHY:.status.conditions[?(@.type=="PodScheduled")].message' 2>&1 \
    | awk '$2 != "Running" || $4 != "True"' | head -6 | cut -c1-240 || true
  grep -h 'waiting for\|timed out\|Error' "$RUN_HOME/helm-debug.log" 2>/dev/null | tail -4 | cut -c1-240 || true
  for f in "$RUN_HOME"/run/{kcm,sched}.log "$RUN_HOME"/run/node-*.log; do
    [[ -f $f ]] && grep -h '^[EF][0-9]\{4\}' "$f" | tail -1 | cut -c1-200 | sed "s|^|$(basename "$f"): |"
  done
}
trap cleanup EXIT
trap "exit 130" INT TERM

# Every Deployment the release rendered is live, Available and fully ready, and every live pod of the
# release is Running and Ready on a hollow node; else prints the first discrepancy and returns 1.
release_state() {
  local d gen observed spec updated ready avail pods bad
  [[ -n $want ]] || { echo "the release renders no Deployment"; return 1; }
  live=$(k get deploy -n "$NS" -l "$SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
  [[ $want == "$live" ]] || { echo "Deployments rendered [$want] vs live [$live]"; return 1; }
  for d in $want; do
    # Rolled out: the controller saw the latest spec, and every replica is updated and ready.
    IFS='|' read -r gen observed spec updated ready avail < <(k get deploy "$d" -n "$NS" -o jsonpath='{.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}|{.status.updatedReplicas}|{.status.readyReplicas}|{.status.conditions[?(@.type=="Available")].status}{"\n"}')
    [[ $observed == "$gen" && $avail == True && ${updated:-0} == "$spec" && ${ready:-0} == "$spec" ]] \
      || { echo "Deployment $d: generation $observed/$gen Available=$avail updated=${updated:-0} ready=${ready:-0} of $spec"; return 1; }
  done
  # name|phase|node|Ready|deletionTimestamp: pods replaced by a rollout may still be terminating.
  pods=$(k get pods -n "$NS" -l "$SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name}|{.status.phase}|{.spec.nodeName}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.deletionTimestamp}{"\n"}{end}')
  live_pods=$(awk -F'|' '$5 == ""' <<<"$pods")
  [[ -n $live_pods ]] || { echo "the release has no pods"; return 1; }
  bad=$(awk -F'|' '!($2 == "Running" && $3 ~ /^node-[0-9]+$/ && $4 == "True")' <<<"$live_pods")
  [[ -z $bad ]] || { echo "pods not Running+Ready on a hollow node: $bad"; return 1; }
}
# Polls release_state for up to 60 s (the HPA controller may still be scaling), then fails with its reason.
assert_release_running() {
  local why=""
  want=$(helm get manifest "$RELEASE" -n "$NS" | k create --dry-run=client -o name -f - | sed -n 's|^deployment.apps/||p' | sort)
  for _ in $(seq 1 60); do
    release_state >"$RUN_HOME/why" && { why=""; break; }
    why=$(cat "$RUN_HOME/why"); sleep 1
  done
  [[ -z $why ]] || fail "$why"
  k get deploy,hpa,pdb -n "$NS" -l "$SELECTOR"
  k get pods -n "$NS" -l "$SELECTOR" -o wide
  ok "$(wc -w <<<"$want") Deployments Available; $(wc -l <<<"$live_pods") pods Running and Ready on hollow nodes"
}

deploy_of() { k get deploy -n "$NS" -l "$SELECTOR,app.kubernetes.io/component=$1" -o jsonpath='{.items[0].metadata.name}'; }
hpa_of() { k get hpa -n "$NS" -l "$SELECTOR,app.kubernetes.io/component=$1" -o jsonpath='{.items[0].metadata.name}'; }
# "replicas/ready env hpa-min" of the three objects the upgrade changes.
watched() {
  printf '%s/%s %s %s\n' \
    "$(k get deploy "$replicas_deploy" -n "$NS" -o jsonpath='{.spec.replicas}')" \
    "$(k get deploy "$replicas_deploy" -n "$NS" -o jsonpath='{.status.readyReplicas}')" \
    "$(k get deploy "$env_deploy" -n "$NS" -o jsonpath="{.spec.template.spec.containers[0].env[?(@.name==\"$UP_ENV\")].value}")" \
    "$(k get hpa "$hpa" -n "$NS" -o jsonpath='{.spec.minReplicas}')"
}

log "cluster up ($NODES hollow nodes)"
# Every hollow kubelet of this 1.20 build serves and dials its fake container runtime at the same fixed
# path, /tmp/kubelet_remote.sock: two in one mount namespace replace each other's socket, and one of
# them either dies at start ("only 1/2 nodes Ready", seen in CI) or runs its pods in the other's
# runtime (pods never Ready). So cluster.sh starts the control plane and node-1, and every further
# node runs in its own mount namespace with a private /tmp; cluster.sh down still stops it (pids file).
"$K8S_TOOLS/cluster.sh" up 1
for n in $(seq 2 "$NODES"); do
  mkdir -p "$RUN_HOME/run/tmp-node-$n"
  TMPDIR=$RUN_HOME/run/tmp unshare -m -- sh -c 'mount --bind "$1" /tmp && shift && exec "$@"' sh "$RUN_HOME/run/tmp-node-$n" \
    "$RUN_HOME/bin/kubemark" --morph=kubelet --name="node-$n" --kubeconfig="$KUBECONFIG" \
    --kubelet-port=$((20250 + 10 * n)) --kubelet-read-only-port=0 >"$RUN_HOME/run/node-$n.log" 2>&1 &
  echo $! >>"$RUN_HOME/run/pids"
done
for _ in $(seq 1 90); do
  [[ $(k get nodes --no-headers 2>/dev/null | grep -c ' Ready') -ge $NODES ]] && break; sleep 1
done
[[ $(k get nodes --no-headers | grep -c ' Ready') -ge $NODES ]] || fail "only $(k get nodes --no-headers | grep -c ' Ready')/$NODES hollow nodes Ready"
# Extended resources are advertised by patching the node's status (what a device plugin would do).
# kubectl < 1.24 has no --subresource, so straight to the API; not as "curl", which gets pretty-printed
# JSON, and the pretty printer of this Go-1.19 build of 1.20 can crash the apiserver (reflect2 bug).
token=$(grep -o 'token: "[^"]*"' "$KUBECONFIG" | cut -d'"' -f2)
code=$(curl -sk -o /dev/null -w '%{http_code}' -A hybridsearch-test-cluster -X PATCH -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json-patch+json' "https://127.0.0.1:16443/api/v1/nodes/$GPU_NODE/status" \
  -d "[{\"op\": \"add\", \"path\": \"/status/capacity/nvidia.com~1gpu\", \"value\": \"$GPUS\"}]")
[[ $code == 200 ]] || fail "patching $GPU_NODE's capacity: HTTP $code"
k taint node "$GPU_NODE" nvidia.com/gpu=present:NoSchedule
for _ in $(seq 1 30); do   # the kubelet derives allocatable from capacity on its next status update
  [[ $(k get node "$GPU_NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == "$GPUS" ]] && break; sleep 1
done
k get nodes -o custom-columns='NAME:.metadata.name,STATUS:.status.conditions[?(@.type=="Ready")].type,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,GPU:.status.allocatable.nvidia\.com/gpu,TAINTS:.spec.taints[*].key,VERSION:.status.nodeInfo.kubeletVersion'
[[ $(k get node "$GPU_NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == "$GPUS" ]] || fail "$GPU_NODE does not advertise $GPUS GPUs"

# Triton's pods sit on the GPU node holding one GPU each; the others, which do not tolerate the
# GPU taint, elsewhere.
assert_gpu_placement() {
  local pods bad
  pods=$(k get pods -n "$NS" -l "$SELECTOR" --field-selector=status.phase=Running -o jsonpath='{range .items[*]}{.metadata.labels.app\.kubernetes\.io/component}|{.spec.nodeName}|{.spec.containers[0].resources.limits.nvidia\.com/gpu}|{.metadata.deletionTimestamp}{"\n"}{end}')
  bad=$(awk -F'|' -v gpu="$GPU_NODE" '$4 == "" && ($1 == "triton" ? !($2 == gpu && $3 == "1") : $2 == gpu)' <<<"$pods")
  [[ -z $bad ]] || fail "GPU placement (component|node|gpus): $bad"
  ok "triton on $GPU_NODE with 1 GPU per pod ($(awk -F'|' '$4 == "" && $1 == "triton"' <<<"$pods" | wc -l) pods); no other pod there"
}

log "a. helm install --wait"
helm_waiting install "$RELEASE" "$CHART" -n "$NS" --create-namespace -f "$VALUES_HOLLOW" --set triton.gpu=1 --wait="$HELM_WAIT" --timeout 180s
assert_release_running
assert_gpu_placement
replicas_deploy=$(deploy_of "$UP_REPLICAS_COMPONENT"); env_deploy=$(deploy_of "$UP_ENV_COMPONENT"); hpa=$(hpa_of "$UP_HPA_COMPONENT")
[[ -n $replicas_deploy && -n $env_deploy && -n $hpa ]] || fail "missing objects: deploy($UP_REPLICAS_COMPONENT)='$replicas_deploy' deploy($UP_ENV_COMPONENT)='$env_deploy' hpa($UP_HPA_COMPONENT)='$hpa'"
before=$(watched)
echo "watched (replicas/ready of $replicas_deploy, $UP_ENV of $env_deploy, minReplicas of hpa/$hpa): $before"
ok "install"

log "b. helm upgrade --wait ($UP_REPLICAS_KEY=$UP_REPLICAS, $UP_ENV_COMPONENT.env.$UP_ENV=$UP_ENV_VALUE, $UP_HPA_KEY=$UP_HPA_MIN)"
helm_waiting upgrade "$RELEASE" "$CHART" -n "$NS" -f "$VALUES_HOLLOW" --set triton.gpu=1 --set "$UP_REPLICAS_KEY=$UP_REPLICAS" \
  --set-string "$UP_ENV_COMPONENT.env.$UP_ENV=$UP_ENV_VALUE" --set "$UP_HPA_KEY=$UP_HPA_MIN" --wait="$HELM_WAIT" --timeout 180s
assert_release_running
assert_gpu_placement
after=$(watched)
echo "watched: $before -> $after"
[[ $after == "$UP_REPLICAS/$UP_REPLICAS $UP_ENV_VALUE $UP_HPA_MIN" ]] || fail "upgrade: live '$after', want '$UP_REPLICAS/$UP_REPLICAS $UP_ENV_VALUE $UP_HPA_MIN'"
[[ $before != "$after" ]] || fail "the upgrade changed nothing"
ok "upgrade reached the live Deployments and HPA"

log "c. helm rollback $RELEASE 1 --wait"
helm_waiting rollback "$RELEASE" 1 -n "$NS" --wait="$HELM_WAIT" --timeout 180s
assert_release_running
assert_gpu_placement
rolled=$(watched)
echo "watched: $after -> $rolled"
[[ $rolled == "$before" ]] || fail "rollback: live '$rolled', want revision 1's '$before'"
helm history "$RELEASE" -n "$NS"
ok "rollback restored revision 1"

log "d. rejected values"
revisions() { helm history "$RELEASE" -n "$NS" -o json | grep -o '"revision":[0-9]*' | tail -1; }
rev_before=$(revisions)
echo "\$ helm upgrade $RELEASE ... -f tests/cluster/values-bad.yaml"
if out=$(helm upgrade "$RELEASE" "$CHART" -n "$NS" -f "$VALUES_HOLLOW" --set triton.gpu=1 -f "$HERE/values-bad.yaml" --wait="$HELM_WAIT" --timeout 60s 2>&1); then
  fail "upgrade with values-bad.yaml succeeded: $out"
fi
echo "$out"
grep -q "values don't meet the specifications of the schema" <<<"$out" || fail "values-bad.yaml failed for another reason than the schema"
[[ $(revisions) == "$rev_before" ]] || fail "the rejected upgrade created a revision"
[[ $(watched) == "$before" ]] || fail "the rejected upgrade changed the live objects"
ok "the schema rejected values-bad.yaml; the release is untouched"
# The server's turn: values the schema passes but the API server refuses, as a second release.
echo "\$ helm install $RELEASE-bad ... -f tests/cluster/values-server-bad.yaml"
if out=$(helm install "$RELEASE-bad" "$CHART" -n "$NS" -f "$VALUES_HOLLOW" --set triton.gpu=1 -f "$HERE/values-server-bad.yaml" --timeout 60s 2>&1); then
  fail "install with values-server-bad.yaml succeeded: $out"
fi
echo "$out"
grep -q 'must be less than or equal to memory limit' <<<"$out" || fail "values-server-bad.yaml failed for another reason than the server's validation"
helm_waiting uninstall "$RELEASE-bad" -n "$NS" --wait="$HELM_WAIT" --timeout 60s
ok "the API server rejected values-server-bad.yaml"

log "e. helm uninstall --wait"
# Every listable kind, namespaced and cluster-scoped, not only the ones the chart is known to render
# (less events, and the deprecated aliases 1.20 still serves: extensions Ingress, ComponentStatus).
any_release="app.kubernetes.io/instance in ($RELEASE,$RELEASE-bad)"
namespaced=$(k api-resources --verbs=list --namespaced=true -o name | grep -vE '^(events|ingresses\.extensions)' | paste -sd, -)
cluster_scoped=$(k api-resources --verbs=list --namespaced=false -o name | grep -v '^componentstatuses' | paste -sd, -)
release_objects() { k get "$namespaced" -A -l "$any_release" -o name; k get "$cluster_scoped" -l "$any_release" -o name; }
release_records() { k get secrets,configmaps -A -l owner=helm -o name; }
# The same queries must see the release before it goes: every object of its manifest, and its records.
rendered=$(helm get manifest "$RELEASE" -n "$NS" | k create --dry-run=client -o name -f - | sort)
unseen=$(comm -23 <(echo "$rendered") <(release_objects | sort))
[[ -z $unseen ]] || fail "the leftover query does not see these objects of the release: $unseen"
echo "before: $(release_objects | wc -l) objects carry the release label ($(wc -l <<<"$rendered") rendered, the rest pods and ReplicaSets); $(release_records | wc -l) helm records"
helm_waiting uninstall "$RELEASE" -n "$NS" --wait="$HELM_WAIT" --timeout 120s
for _ in $(seq 1 60); do   # pods go after their grace period, once the hollow kubelet reports them gone
  left=$(release_objects)
  [[ -z $left ]] && break; sleep 1
done
[[ -z $left ]] || fail "left behind after uninstall: $left"
records=$(release_records)
[[ -z $records ]] || fail "helm release records left behind: $records"
releases=$(helm list -A -q)   # helm 4 lists releases in any status by default
[[ -z $releases ]] || fail "helm still lists releases: $releases"
echo "after: no object of any kind with $any_release; no helm records; helm list empty"
ok "uninstall left nothing behind"
