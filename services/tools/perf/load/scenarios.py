"""Which requests a run sends: the scenarios (mode, effort, rerank), the queries they cycle through and
the collection they search (a bench collection is indexed first when asked for by its dataset)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hybridsearch.tools.bench import BenchMode, collection_name, ensure_indexed
from hybridsearch.client import GatewayClient
from hybridsearch.config.settings import Settings
from hybridsearch.corpus import read_queries
from hybridsearch.v1 import common_pb2, search_pb2

HYBRID = common_pb2.RETRIEVAL_MODE_HYBRID
SCENARIOS: dict[str, BenchMode] = {
    "fast": BenchMode(HYBRID, common_pb2.EFFORT_FAST),
    "balanced": BenchMode(HYBRID, common_pb2.EFFORT_BALANCED),
    "thorough": BenchMode(HYBRID, common_pb2.EFFORT_THOROUGH),
    "rerank": BenchMode(HYBRID, rerank=True),  # the default effort with the reranker forced on
    "bm25": BenchMode(common_pb2.RETRIEVAL_MODE_BM25, common_pb2.EFFORT_FAST),
    "vector": BenchMode(common_pb2.RETRIEVAL_MODE_VECTOR, common_pb2.EFFORT_FAST),
}
# Without --queries-from or --dataset: questions the sample corpus (samples/corpus, `make run`) answers.
SAMPLE_QUERIES = (
    "how are variant queries weighted when results are fused?",
    "reciprocal rank fusion",
    "what does the cross-encoder reranker score?",
    "bm25 parameters k1 and b",
    "how are documents chunked at ingestion",
    "pseudo relevance feedback expansion",
    "what happens when a leg fails or times out",
    "vector search with MiniLM embeddings",
)


def parse_scenarios(names: str) -> list[str]:
    wanted = [n.strip().lower() for n in names.split(",") if n.strip()]
    if unknown := [n for n in wanted if n not in SCENARIOS]:
        raise ValueError(f"unknown scenarios {unknown}: choose from {', '.join(SCENARIOS)}")
    return wanted or ["fast"]


def load_queries(folder: Path | None) -> list[str]:
    """Every query text of a BEIR folder's queries.jsonl, in file order; the sample questions without one."""
    if folder is None:
        return list(SAMPLE_QUERIES)
    texts = [t for t in read_queries(folder).values() if t.strip()]
    if not texts:
        raise ValueError(f"{folder / 'queries.jsonl'} has no queries")
    return texts


def zipf_ranks(population: int, count: int, s: float, rng: np.random.Generator) -> list[int]:
    """`count` draws of ranks 0..population-1, rank r with probability proportional to 1 / (r + 1)^s."""
    weights = 1.0 / np.arange(1, population + 1, dtype=np.float64) ** s
    return rng.choice(population, size=count, p=weights / weights.sum()).tolist()


ZIPF_DRAWS = 20  # a Zipf sequence is this many times the queries long before a run cycles through it again


def zipf_sequence(queries: list[str], s: float, seed: int) -> list[str]:
    """The queries as real traffic repeats them: a seeded popularity order (a shuffle), then draws with a Zipf
    distribution of exponent `s` over it (s = 1: the most popular query about 1 / ln(n) of all requests)."""
    rng = np.random.default_rng(seed)
    ranked = [queries[i] for i in rng.permutation(len(queries))]
    return [ranked[r] for r in zipf_ranks(len(ranked), ZIPF_DRAWS * len(ranked), s, rng)]


def repeat_share(sequence: list[str]) -> float:
    """The share of a sequence's items that appeared earlier in it."""
    return round(1 - len(set(sequence)) / len(sequence), 4) if sequence else 0.0


def search_requests(scenario: str, queries: list[str], collection: str, top_k: int,
                    explain: bool) -> list[search_pb2.SearchRequest]:
    """One request per query, built once (a run cycles through them)."""
    requests = []
    for text in queries:
        request = SCENARIOS[scenario].request(text, collection)
        request.top_k, request.explain = top_k, explain
        requests.append(request)
    return requests


def bench_collection(folder: Path, address: str, settings: Settings) -> tuple[str, int]:
    """The collection `hybridsearch bench` uses for a BEIR folder, indexed first when it is not yet;
    returns its name and how many documents were indexed now (0 when it already was)."""
    client = GatewayClient(address)
    try:
        name = collection_name(folder, settings)
        return name, ensure_indexed(client, folder, name)
    finally:
        client.close()
