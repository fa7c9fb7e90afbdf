"""Writes charts/hybridsearch/values.schema.json (JSON Schema draft-07) for the chart's values.

The `config` block is derived from the pydantic settings in services/config/settings.py, so a setting
added there is accepted by the chart only after this is re-run (tests/charts checks the two agree);
everything else is the chart's own values, described here once.

    .venv/bin/python charts/tools/values_schema.py           # rewrite the schema
    .venv/bin/python charts/tools/values_schema.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hybridsearch.query import legs

from hybridsearch.runtime import services
from hybridsearch.config.collections import CollectionConfig
from hybridsearch.config.settings import Settings
from hybridsearch.contract.validation import COLLECTION_NAME

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "hybridsearch" / "values.schema.json"

# Settings the chart sets itself from other values (addresses, engines, folders), or that only the
# one-machine launcher reads: not accepted under `config`, so they cannot contradict the chart.
CHART_MANAGED = {
    "data_dir": "always /data in the pod",
    "metrics_port": "metrics.port (0 when metrics.enabled is false)",
    "models_dir": "the image's models (docker/Dockerfile)",
    "endpoints": "Service names and component ports",
    "bm25.engine": "externalOpenSearch.url",
    "bm25.opensearch_url": "externalOpenSearch.url",
    "vector.engine": "externalQdrant.url",
    "vector.qdrant_url": "externalQdrant.url",
    "vector.qdrant_api_key": "externalQdrant.apiKeySecret: a Secret, never a value",
    "redis.state_url": "externalRedis.url",
    "redis.cache_url": "externalRedis.cacheUrl",
    "redis.cache_max_mb": "the cache Redis's own maxmemory (externalRedis.cacheUrl)",
    "expansion.llm_serve": "the launcher's llama.cpp server: never in a pod",
    "expansion.llm_port": "the launcher's llama.cpp server",
    "expansion.llm_threads": "the launcher's llama.cpp server",
    "rerank.triton_url": "the Triton Service",
    "rerank.triton_http_port": "triton.ports",
    "rerank.triton_metrics_port": "triton.ports",
    "rerank.model_name": "triton.modelName",
    "tls": "tls.* values and their Secrets",
    "auth": "auth.* values and their Secret",
    "api_key": "what a client sends, never a server setting",
    "collections": "values.collections (HYBRIDSEARCH_COLLECTIONS, JSON)",
    "paging.secret": "paging.existingSecret or the chart's Secret, never a value",
    "sealing.keys_file": "sealing.keysSecret: a Secret, never a value",
    "collections_file": "values.collections",
    "topology": "topology.inGateway (no pods for what runs inside the gateway)",
}

# Closed sets and ranges the settings' types do not carry.
CONFIG_CONSTRAINTS: dict[str, dict] = {
    "log_level": {"enum": ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]},
    "fusion.method": {"enum": ["rrf", "linear", "zscore", "dbsf"]},
    "bm25.stopwords": {"enum": ["lucene", "en_plus", "none"]},
    "bm25.k1": {"minimum": 0},
    "bm25.b": {"minimum": 0, "maximum": 1},
    "vector.embedder": {"enum": ["minilm-fp32", "minilm-int8"]},
    # Leg weights by leg name: the leg table's legs (a misspelt leg would weigh nothing).
    **{f"fusion.{attr}": {"propertyNames": {"enum": list(legs.names())}} for attr in legs.MAPS},
}

# Old setting names read onto a newer setting (not fields, so not in Settings' own schema): still accepted.
CONFIG_OLD_NAMES: dict[str, dict[str, dict]] = {
    "fusion": {name: {"type": "number", "minimum": 0,
                      "$comment": f"old name: {' and '.join(f'{attr}.{leg}' for attr in attrs)} (query/legs.py LEGACY)"}
               for name, (leg, attrs) in legs.LEGACY.items()},
}


def resolve(schema: dict, defs: dict) -> dict:
    """Inlines pydantic's $defs references, and drops titles (noise in helm's error messages)."""
    if "$ref" in schema:
        return resolve(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    out = {}
    for key, value in schema.items():
        if key in ("title", "description"):
            continue
        if isinstance(value, dict):
            value = (
                resolve(value, defs)
                if key != "properties"
                else {k: resolve(v, defs) for k, v in value.items()}
            )
        elif isinstance(value, list):
            value = [resolve(v, defs) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def config_schema() -> dict:
    """Settings' own JSON schema (types, bounds, Literal choices), closed, without chart-managed keys."""
    full = Settings.model_json_schema(mode="validation")
    schema = resolve(full, full.get("$defs", {}))
    schema.pop("$defs", None)

    def close(node: dict, prefix: str) -> dict:
        props = {}
        for name, sub in node["properties"].items():
            dotted = f"{prefix}{name}"
            if dotted in CHART_MANAGED:
                continue
            if sub.get("type") == "object" and "properties" in sub:
                sub = close(sub, f"{dotted}.")
            else:
                sub = {**sub, **CONFIG_CONSTRAINTS.get(dotted, {})}
            props[name] = sub
        props.update(CONFIG_OLD_NAMES.get(prefix.rstrip("."), {}))
        return {"type": "object", "additionalProperties": False, "properties": props}

    return close(schema, "")


def collections_schema() -> dict:
    """values.collections: collection name -> CollectionConfig (services/config/collections.py)."""
    full = CollectionConfig.model_json_schema(mode="validation")
    config = resolve(full, full.get("$defs", {}))
    config.pop("$defs", None)
    config["additionalProperties"] = False
    return {"type": "object", "propertyNames": {"pattern": f"^{COLLECTION_NAME.pattern}$"},
            "additionalProperties": config}


def obj(properties: dict, required: list[str] | None = None, **extra) -> dict:
    schema = {"type": "object", "additionalProperties": False, "properties": properties, **extra}
    if required:
        schema["required"] = required
    return schema


STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
ENV_MAP = {
    "type": "object",
    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "additionalProperties": {"type": ["string", "number", "boolean"]},
}


def chart_schema() -> dict:
    definitions = {
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
        "image": obj(
            {
                "repository": {"type": "string", "minLength": 1},
                "tag": {"type": "string"},
                "pullPolicy": {"$ref": "#/definitions/pullPolicy"},
            },
            ["repository"],
        ),
        "quantity": {
            "type": ["string", "number"],
            "pattern": r"^[0-9]+(\.[0-9]+)?([eE][0-9]+|[numkKMGTPE]i?)?$",
        },
        "resources": obj(
            {
                "requests": {"type": "object", "additionalProperties": {"$ref": "#/definitions/quantity"}},
                "limits": {"type": "object", "additionalProperties": {"$ref": "#/definitions/quantity"}},
            }
        ),
        "autoscaling": obj(
            {
                "enabled": {"type": "boolean"},
                "minReplicas": {"type": "integer", "minimum": 1},
                "maxReplicas": {"type": "integer", "minimum": 1},
                "targetCPUUtilizationPercentage": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            ["enabled"],
        ),
        "podDisruptionBudget": obj(
            {
                "enabled": {"type": "boolean"},
                "minAvailable": {"type": ["integer", "string"], "minimum": 0, "pattern": "^[0-9]+%$"},
                "maxUnavailable": {"type": ["integer", "string"], "minimum": 1, "pattern": "^[0-9]+%$"},
            },
            ["enabled"],
            # One of the two, as the API requires.
            **{"not": {"required": ["minAvailable", "maxUnavailable"]}},
        ),
        "service": obj(
            {
                "type": {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                "annotations": STRING_MAP,
            }
        ),
        "persistence": obj(
            {
                "enabled": {"type": "boolean"},
                "size": {"$ref": "#/definitions/quantity"},
                "storageClass": {"type": "string"},
            }
        ),
        "probe": obj(
            {
                "periodSeconds": {"type": "integer", "minimum": 1},
                "failureThreshold": {"type": "integer", "minimum": 1},
                "timeoutSeconds": {"type": "integer", "minimum": 1},
                "initialDelaySeconds": {"type": "integer", "minimum": 0},
            }
        ),
    }
    scheduling = {
        "nodeSelector": {"$ref": "#/definitions/stringMap"},
        "tolerations": {"type": "array", "items": {"type": "object"}},
        "affinity": {"type": "object"},
        "podAnnotations": {"$ref": "#/definitions/stringMap"},
    }
    definitions["stringMap"] = STRING_MAP
    definitions["envMap"] = ENV_MAP

    def component(stateful: bool) -> dict:
        props = {
            "port": {"$ref": "#/definitions/port"},
            "replicas": {"type": "integer", "minimum": 0},
            "service": {"$ref": "#/definitions/service"},
            "resources": {"$ref": "#/definitions/resources"},
            "autoscaling": {"$ref": "#/definitions/autoscaling"},
            "podDisruptionBudget": {"$ref": "#/definitions/podDisruptionBudget"},
            "env": {"$ref": "#/definitions/envMap"},
            **scheduling,
        }
        if stateful:
            props["persistence"] = {"$ref": "#/definitions/persistence"}
        return obj(props, ["port", "replicas"])

    url = lambda schemes: {"type": "string", "pattern": rf"^(|({schemes})://[^\s]+)$"}
    properties = {
        "nameOverride": {"type": "string"},
        "fullnameOverride": {"type": "string"},
        "image": {"$ref": "#/definitions/image"},
        "imagePullSecrets": {"type": "array", "items": obj({"name": {"type": "string"}}, ["name"])},
        "serviceAccount": obj(
            {"create": {"type": "boolean"}, "name": {"type": "string"}, "annotations": STRING_MAP}
        ),
        "podSecurityContext": {"type": "object"},
        "securityContext": {"type": "object"},
        "config": config_schema(),
        "collections": collections_schema(),
        "env": {"$ref": "#/definitions/envMap"},
        "envFrom": {"type": "array", "items": {"type": "object"}},
        "tls": obj(
            {
                "enabled": {"type": "boolean"},
                "secretName": {"type": "string"},
                "gatewaySecretName": {"type": "string"},
                "gatewayClientAuth": {"type": "boolean"},
            }
        ),
        "auth": obj(
            {
                "enabled": {"type": "boolean"},
                "existingSecret": {"type": "string"},
                "key": {"type": "string", "minLength": 1},
                # bearer JWTs of the identity provider (config/access.py OidcSettings): public values only
                "oidc": obj({
                    "issuer": {"type": "string"},
                    "audience": {"type": "string"},
                    "jwksUrl": {"type": "string", "pattern": "^(https?://.+)?$"},
                    "jwksConfigMap": {"type": "string"},
                    "userClaim": {"type": "string", "minLength": 1},
                    "groupsClaim": {"type": "string", "minLength": 1},
                    "read": {"type": "array", "items": {"type": "string", "minLength": 1}},
                }),
            }
        ),
        "paging": obj({"existingSecret": {"type": "string"}}),
        "sealing": obj({"keysSecret": {"type": "string"}, "key": {"type": "string", "minLength": 1}}),
        "topology": obj({"inGateway": {"type": "array", "uniqueItems": True,
                                       "items": {"enum": list(services.COLOCATABLE)}}}),
        "externalOpenSearch": obj({"url": url("https?")}),
        "externalQdrant": obj(
            {
                "url": url("https?"),
                "apiKeySecret": obj({"name": {"type": "string"}, "key": {"type": "string", "minLength": 1}}),
            }
        ),
        "externalRedis": obj({"url": url("rediss?|unix"), "cacheUrl": url("rediss?|unix")}),
        "otel": obj(
            {
                "endpoint": url("https?"),
                "insecure": {"type": "boolean"},
                "sampler": {
                    "type": "string",
                    "enum": [
                        "always_on",
                        "always_off",
                        "traceidratio",
                        "parentbased_always_on",
                        "parentbased_always_off",
                        "parentbased_traceidratio",
                    ],
                },
                "samplerArg": {"type": "string", "pattern": r"^(0(\.[0-9]+)?|1(\.0+)?)$"},
                "resourceAttributes": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "number", "boolean"]},
                },
            }
        ),
        "metrics": obj(
            {
                "enabled": {"type": "boolean"},
                "port": {"$ref": "#/definitions/port"},
                "path": {"type": "string", "pattern": "^/"},
                "podAnnotations": {"type": "boolean"},
                "serviceMonitor": obj(
                    {
                        "enabled": {"type": "boolean"},
                        "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "labels": STRING_MAP,
                    }
                ),
            }
        ),
        "grafana": obj(
            {
                "dashboards": obj(
                    {
                        "enabled": {"type": "boolean"},
                        "label": {"type": "string", "minLength": 1},
                        "labelValue": {"type": "string"},
                        "folder": {"type": "string"},
                        "namespace": {"type": "string"},
                    }
                )
            }
        ),
        "probes": obj(
            {
                "mode": {"type": "string", "enum": ["auto", "grpc", "exec"]},
                "startup": {"$ref": "#/definitions/probe"},
                "readiness": {"$ref": "#/definitions/probe"},
                "liveness": {"$ref": "#/definitions/probe"},
            }
        ),
        **scheduling,
        "podLabels": STRING_MAP,
        **{s.name: component(stateful=s.store) for s in services.SERVICES},
        "reconcile": obj(
            {
                "enabled": {"type": "boolean"},
                "schedule": {"type": "string", "minLength": 9},
                "collections": {"type": "array", "items": {"type": "string", "pattern": f"^{COLLECTION_NAME.pattern}$"}},
                "activeDeadlineSeconds": {"type": "integer", "minimum": 60},
                "resources": {"$ref": "#/definitions/resources"},
            },
            ["enabled", "schedule", "collections"],
        ),
        "snapshots": obj(
            {
                "enabled": {"type": "boolean"},
                "schedule": {"type": "string", "minLength": 9},
                "collections": {"type": "array", "items": {"type": "string", "pattern": f"^{COLLECTION_NAME.pattern}$"}},
                "repository": {"type": "string", "pattern": "^(s3://[a-z0-9][a-z0-9.-]{2,62}(/.*)?)?$"},
                "keep": {"type": "integer", "minimum": 1},
                "apiKeySecret": obj({"name": {"type": "string"}, "key": {"type": "string", "minLength": 1}}),
                "activeDeadlineSeconds": {"type": "integer", "minimum": 60},
                "resources": {"$ref": "#/definitions/resources"},
            },
            ["enabled", "schedule", "collections", "keep"],
        ),
        "triton": obj(
            {
                "enabled": {"type": "boolean"},
                "image": {"$ref": "#/definitions/image"},
                "replicas": {"type": "integer", "minimum": 0},
                "gpu": {"type": "integer", "minimum": 0},
                "modelName": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
                "ports": obj(
                    {
                        "grpc": {"$ref": "#/definitions/port"},
                        "http": {"$ref": "#/definitions/port"},
                        "metrics": {"$ref": "#/definitions/port"},
                    },
                    ["grpc", "http", "metrics"],
                ),
                "modelRepository": obj(
                    {
                        "path": {"type": "string", "pattern": "^/"},
                        "existingClaim": {"type": "string"},
                        "config": {"type": "string"},
                    }
                ),
                "extraArgs": {"type": "array", "items": {"type": "string", "pattern": "^--"}},
                "resources": {"$ref": "#/definitions/resources"},
                "autoscaling": {"$ref": "#/definitions/autoscaling"},
                "podDisruptionBudget": {"$ref": "#/definitions/podDisruptionBudget"},
                "gpuTolerations": {"type": "array", "items": {"type": "object"}},
                **scheduling,
            }
        ),
    }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "hybridsearch chart values (generated by charts/tools/values_schema.py)",
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "definitions": definitions,
    }


def render() -> str:
    return json.dumps(chart_schema(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if SCHEMA_PATH.read_text() != text:
            print(f"{SCHEMA_PATH} is out of date: run .venv/bin/python charts/tools/values_schema.py")
            return 1
        return 0
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
