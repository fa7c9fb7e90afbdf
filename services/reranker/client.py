"""Client for the reranker model on Triton, over Triton's own gRPC protocol (tritonclient)."""

from __future__ import annotations

import time

import numpy as np
import tritonclient.grpc.aio as triton_grpc
from opentelemetry.trace import SpanKind

from hybridsearch.runtime import metrics
from hybridsearch.config.search import RerankSettings
from hybridsearch.runtime.telemetry import inject_headers, tracer

MAX_PASSAGE_CHARS = 2000
INFO_TTL_S = 30.0


class RerankerClient:
    def __init__(self, cfg: RerankSettings) -> None:
        self.cfg = cfg
        self.client = triton_grpc.InferenceServerClient(url=cfg.triton_url)
        self._info: dict | None = None
        self._info_at = 0.0
        self.tracer = tracer(__name__)

    async def model_info(self, refresh: bool = False) -> dict:
        """{'trained': bool, 'name': str, 'gpu': bool}; raises if Triton or the model is not ready.
        Cached for INFO_TTL_S so a model swapped on Triton is noticed."""
        if self._info is None or refresh or time.monotonic() - self._info_at > INFO_TTL_S:
            self._info = None
            config = (await self.client.get_model_config(self.cfg.model_name, as_json=True, client_timeout=2.0))["config"]
            params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
            groups = config.get("instance_group", [])
            self._info = {
                "trained": params.get("trained") == "true",
                "name": params.get("model_name", self.cfg.model_name),
                # An ensemble (the GPU repository) has no instance groups of its own: it says so in a parameter.
                "gpu": any(g.get("kind") == "KIND_GPU" for g in groups) or params.get("gpu") == "true",
            }
            self._info_at = time.monotonic()
        return self._info

    async def score(self, query: str, passages: list[str], timeout_s: float) -> list[float]:
        if not passages:
            return []
        n = len(passages)
        q = np.array([[query.encode("utf-8")]] * n, dtype=np.object_)
        p = np.array([[t[:MAX_PASSAGE_CHARS].encode("utf-8")] for t in passages], dtype=np.object_)
        inputs = [triton_grpc.InferInput("query", [n, 1], "BYTES"), triton_grpc.InferInput("passage", [n, 1], "BYTES")]
        inputs[0].set_data_from_numpy(q)
        inputs[1].set_data_from_numpy(p)
        metrics.RERANK_POOL.observe(n)
        # Triton's channel is not ours to intercept: a client span of its own, and traceparent in the
        # request headers so a Triton with OpenTelemetry tracing on continues the trace.
        attributes = {"rpc.system": "grpc", "rpc.service": "inference.GRPCInferenceService", "rpc.method": "ModelInfer",
                      "server.address": self.cfg.triton_url, "triton.model": self.cfg.model_name, "rerank.pairs": n}
        with self.tracer.start_as_current_span("triton.infer", kind=SpanKind.CLIENT, attributes=attributes):
            result = await self.client.infer(
                self.cfg.model_name, inputs, outputs=[triton_grpc.InferRequestedOutput("score")],
                client_timeout=max(0.05, timeout_s), headers=inject_headers(),
            )
        return result.as_numpy("score").reshape(-1).astype(float).tolist()

    async def close(self) -> None:
        await self.client.close()
