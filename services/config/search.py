"""What the query path's stages take: expansion, fusion, link expansion, rerank, paging, admission, resilience."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from hybridsearch.query import legs



class ExpansionSettings(BaseModel):
    cache_ttl_s: int = 7 * 24 * 3600
    prompt_version: str = "v1"
    # OpenAI-compatible chat endpoint; empty means no LLM (pseudo-relevance feedback only).
    llm_url: str = ""
    llm_model: str = "local"
    llm_timeout_s: float = 20.0
    # One machine: the launcher serves a packaged GGUF model with llama.cpp's OpenAI-compatible server
    # when llm_url is empty. "auto" picks the strongest one installed (`make llm`); "" serves none.
    llm_serve: str = "auto"  # auto | qwen2.5-coder-0.5b | smollm2-135m | ""
    llm_port: int = 8080
    llm_threads: int = 0  # 0 = llama.cpp's default (all cores)
    llm_max_tokens: int = 320

    @property
    def served_llm_url(self) -> str:
        """Where the llama.cpp server the launcher starts (llm_serve) answers."""
        return f"http://127.0.0.1:{self.llm_port}/v1"
    # Pseudo-relevance feedback (RM3-style) over the top BM25 hits; BALANCED uses it only when
    # prf_in_balanced is set (THOROUGH without an LLM always does).
    prf_in_balanced: bool = True
    prf_docs: int = 5
    prf_terms: int = 8
    # Skip expansion when the top BM25 hit dominates: top score >= ratio * second score.
    dominant_ratio: float = 1.8
    dominant_min_score: float = 8.0


class FusionSettings(BaseModel):
    # The service default, chosen in docs/quality.md (`hybridsearch tune`): z-score fusion with equal leg
    # weights had the best worst-case margin over the competing designs across all seven collections.
    # The library (fusion.methods.FusionParams) defaults to RRF, with the same leg weights.
    method: str = "zscore"  # rrf | linear | zscore | dbsf
    rrf_k: float = 60.0
    variant_weight: float = 0.5
    hyde_weight: float = 0.7
    feedback_weight: float = 0.5
    top_rank_bonus: float = 0.1
    # Each leg's weight by leg name, under the score-based methods (linear, zscore, dbsf) and under RRF;
    # defaults and the legs are the leg table's (query/legs.py: bm25, vector and tag 0.5 / RRF 1.0, the
    # link expansion's graph list 0.25 under both). A map sets the legs it names, the others keep their
    # defaults: HYBRIDSEARCH_FUSION__LEG_WEIGHTS='{"bm25": 0.4, "vector": 0.6}'. The old names
    # (HYBRIDSEARCH_FUSION__BM25_WEIGHT, RRF_TAG_WEIGHT, GRAPH_WEIGHT, ...: legs.LEGACY) are still read
    # onto their leg's entry; an entry of the map wins over an old name.
    leg_weights: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=legs.default_weights)
    rrf_leg_weights: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=legs.default_rrf_weights)

    @model_validator(mode="before")
    @classmethod
    def _old_weight_names(cls, data):
        if not isinstance(data, dict) or not any(name in data for name in legs.LEGACY):
            return data
        data = dict(data)
        old = legs.legacy_entries({name: data.pop(name) for name in legs.LEGACY if name in data})
        for attr, entries in old.items():
            given = data.get(attr) or {}
            if isinstance(given, str):  # JSON, as the environment spells a map
                given = json.loads(given)
            data[attr] = {**entries, **given} if isinstance(given, dict) else given  # not a map: refused below
        return data

    @model_validator(mode="after")
    def _every_leg(self) -> "FusionSettings":
        for attr in legs.MAPS:
            unknown = sorted(set(getattr(self, attr)) - set(legs.names()))
            if unknown:
                raise ValueError(f"fusion.{attr}: unknown leg {', '.join(unknown)} (legs: {', '.join(legs.names())})")
            setattr(self, attr, {**legs.defaults(attr), **getattr(self, attr)})
        return self


class GraphSettings(BaseModel):
    """Link expansion (`graph`; gateway/query/graph.py asks, vector/neighbours.py answers)."""

    # The top fused documents whose one-hop neighbours are looked up (GNO: "bounded one-hop neighbors
    # from top seeds"), and at most how many neighbours join the second fusion pass.
    seeds: int = Field(5, ge=1, le=50)
    neighbours: int = Field(20, ge=1, le=200)
    # The Neighbours call's own budget within the search deadline (3 payload lookups, 1 embedding, 1
    # filtered search): a slow graph stage fails alone, reported, and the answer goes on without it.
    timeout_s: float = Field(0.5, gt=0)
    # Edge weights: a neighbour's score is its best chunk's similarity to the query times the strongest
    # edge that reaches it. Explicit links (a Markdown link or the links field, either direction) are
    # the author's word; a [[wiki]] link names a page by name, weaker; a wiki name that fits several
    # documents (ambiguous) may mean any of them, weaker still (GNO: explicit above inferred and ambiguous).
    explicit_weight: float = Field(1.0, gt=0, le=1)
    wiki_weight: float = Field(0.7, gt=0, le=1)
    ambiguous_weight: float = Field(0.4, gt=0, le=1)
    # Neighbours considered at most (strongest edges first) before they are scored by the query.
    candidates: int = Field(200, ge=1, le=2000)


class RerankSettings(BaseModel):
    triton_url: str = "127.0.0.1:8001"  # Triton gRPC endpoint
    triton_http_port: int = 8000
    triton_metrics_port: int = 8002
    model_name: str = "reranker"
    # Candidate pools: CPU Triton reranks 10 in BALANCED (better than 20 on all six collections measured with
    # the shipped model, docs/quality.md); THOROUGH 40; with a GPU, 64 (standard) / 256 (deep).
    pool_cpu: int = 10
    pool_cpu_deep: int = 10  # THOROUGH on CPU: 40 lowered nDCG@10 (docs/quality.md "THOROUGH's policy")
    pool_gpu_standard: int = 64
    pool_gpu_deep: int = 256
    min_candidates: int = 5
    # BALANCED reranks only with a trained model unless this forces it.
    allow_untrained: bool = False
    # Whether BALANCED (the default effort) reranks at all: only where it raised nDCG@10 on every
    # collection (docs/quality.md). THOROUGH reranks whenever a trained model is served.
    in_balanced: bool = False
    score_floor: float = 0.0
    timeout_s: float = 5.0
    # Less than this left of the search's deadline when the head is ready: the answer goes out in fused
    # order, with a notice, rather than wait for a rerank that cannot finish in time.
    min_time_s: float = Field(0.05, ge=0)
    # Position-aware blend: fusion's share of the score by fused rank, (last rank, weight) ascending, then
    # the tail's (GNO's 75/60/40 by default; docs/quality.md measures others).
    bands: list[tuple[int, float]] = [(3, 0.75), (10, 0.60)]
    tail_fusion_weight: float = Field(0.40, ge=0, le=1)

    @field_validator("bands")
    @classmethod
    def _ascending_bands(cls, bands: list[tuple[int, float]]) -> list[tuple[int, float]]:
        ranks = [last for last, _ in bands]
        if ranks != sorted(set(ranks)) or any(r < 1 for r in ranks) or any(not 0 <= w <= 1 for _, w in bands):
            raise ValueError("bands are (last rank, fusion weight) pairs with ascending ranks >= 1 and weights in [0, 1]")
        return bands


class PagingSettings(BaseModel):
    """Page tokens (gateway/query/paging.py): a first page's order kept in Redis for its later pages."""

    # How long a page token and its stored order live; a later page after that is a clear error.
    ttl_s: float = Field(600.0, gt=0)
    # The first hits of an order that are kept (later pages read only these); 0 turns page tokens off.
    max_hits: int = Field(200, ge=0, le=1000)
    # The key tokens are signed with, shared by every gateway replica (a chart Secret; `serve all` makes
    # data_dir/auth/paging.key). Unset: a key of this process only (tokens die with it), with a warning.
    secret: SecretStr | None = None


class AdmissionSettings(BaseModel):
    """How much work each process holds at once (docs/performance.md measures these on 2 cores)."""

    # Gateway: searches in flight. 4 on 2 cores: FAST at 100 QPS (2x the knee with 6) gave the goodput of 6
    # (82.7 vs 81.2 answers/s) at admitted p99 122 ms instead of 172 ms, and the knee rose from 50 to 60 QPS
    # (docs/performance.md).
    max_in_flight: int = Field(4, ge=1)
    # Searches waiting for a slot, a hard cap (a burst of 40 FAST searches fits). A search waits only when
    # its expected wait plus its expected service time fits what is left of its own deadline, and not when
    # the queue is standing (CoDel); otherwise it is refused RESOURCE_EXHAUSTED at once
    # (gateway/access/admission.py, docs/performance.md).
    max_queue: int = Field(64, ge=0)
    # The longest any search waits for a slot, whatever its deadline (a backstop: the deadline rule and the
    # standing-queue test refuse sooner; a request without a client deadline has the effort's, 10 s or more).
    max_wait_s: float = Field(1.0, ge=0)
    # Ingest batches in flight at the gateway (each holds embedding work in the vector service).
    max_ingest_in_flight: int = Field(4, ge=1)
    # Every gRPC server (gateway and internal services): concurrent RPCs before gRPC itself answers
    # RESOURCE_EXHAUSTED, a backstop against any caller that does not bound itself.
    max_concurrent_rpcs: int = Field(256, ge=1)


class ResilienceSettings(BaseModel):
    """How the gateway treats a part that is slow or failing (docs/faults.md measures these)."""

    # Each call's own budget inside the search deadline: a black-holed leg costs this, not the whole
    # deadline, and never holds an admission slot for long.
    leg_timeout_s: float = Field(1.0, gt=0)
    fusion_timeout_s: float = Field(0.5, gt=0)
    # A leg slower than this answered but is reported late (LegStatus.reason; informational: FAST legs answer
    # in 5-15 ms idle and under 100 ms at the knee).
    leg_late_s: float = Field(0.15, gt=0)
    # A straggling retrieval leg: once the other leg has answered, it gets max(straggler_grace_s,
    # straggler_factor x the first leg's time) more, then the answer goes on without it (reported
    # failed, counted by its breaker). A black-holed leg then costs 0.25 s, not leg_timeout_s.
    straggler_grace_s: float = Field(0.25, gt=0)
    straggler_factor: float = Field(4.0, ge=1)
    # Circuit breakers (purgatory), one per part: after `breaker_threshold` failures in a row the part is
    # skipped for `breaker_reset_s`, then tried again (a success closes the breaker).
    breaker_threshold: int = Field(5, ge=1)
    breaker_reset_s: float = Field(2.0, gt=0)


class QuerySettings(BaseModel):
    """The query path's own figures (gateway/query): its deadlines, how deep legs and fusion go, where fusion
    runs, the score floor. HYBRIDSEARCH_QUERY__<NAME>; the names they had at the root are refused, naming these."""

    # One deadline for the whole query path; legs get what is left of it. THOROUGH waits for an LLM.
    search_deadline_s: float = 10.0
    thorough_deadline_s: float = 30.0
    # Expansion must answer this long before the deadline: variant legs, fusion and rerank come after.
    expansion_reserve_s: float = 3.0
    # How long the legs that take variant queries wait for expansion before sending their original query:
    # an expansion that answers inside it (PRF, a cached LLM answer) sends each such leg the original and its
    # variants in one call (one hop, one embedding batch); a slower one (an LLM generating) leaves the
    # original to go alone at once and the variants to follow as a round of their own. 0: never wait.
    variant_batch_wait_s: float = Field(0.03, ge=0, le=1)
    # Candidates each leg returns per query, and how many fused documents are kept.
    leg_depth: int = 100
    fusion_depth: int = 1000
    # Answers of at most this many ranked lists are fused in the gateway, by the same library as the fusion
    # service (fusion/methods.py: the same hits), without the hop. 1: a single list only (its fusion costs
    # less than any hop). 2 also takes FAST's two legs: measured ~3 ms of CPU less a FAST answer on 2 cores
    # (gateway +2.4, fusion service -5.6: docs/performance.md, "The fusion hop"), the fusion service then
    # serving the efforts with variants. Kept at 1 so that fusion scales and fails on its own by default.
    fuse_in_gateway_lists: int = Field(1, ge=1)
    # The score floor: the min_score of a request that sets none (0 turns it off; SearchRequest.no_floor too). A
    # hit scoring under it says nothing worth reading. Calibrated on judged and off-domain queries (docs/quality.md,
    # "The score floor"): the largest value that kept every relevant hit of SciFact's first pages. Only reranked
    # answers score under 0.40 (calibration.py: the not-reranked band). Not rerank.score_floor (a cut on the
    # cross-encoder's probability before the blend).
    default_min_score: float = Field(0.04, ge=0, le=1)
