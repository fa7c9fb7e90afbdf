"""THOROUGH policy variants on the first 50 judged queries (LLM expansions cached from the bench run)."""
import json, sys
from dataclasses import dataclass
from pathlib import Path
from hybridsearch.cli.base import gateway_client
from hybridsearch.config.settings import get_settings
from hybridsearch.corpus import load_judged_queries
from hybridsearch.tools.bench import collection_name, run_mode
from hybridsearch.v1 import common_pb2, fusion_pb2, search_pb2

@dataclass
class Variant:
    rerank: bool | None = None
    fusion: dict | None = None
    effort: int = common_pb2.EFFORT_THOROUGH
    def request(self, query, collection, fuzzy=None):
        req = search_pb2.SearchRequest(query=query, collection=collection, top_k=100, effort=self.effort)
        if self.rerank is not None:
            req.rerank = self.rerank
        if self.fusion:
            req.fusion.CopyFrom(fusion_pb2.FusionConfig(**self.fusion))
        return req

folder = Path(sys.argv[1])
variants = {
    "thorough-norerank": Variant(rerank=False),
    "balanced-rerank10": Variant(rerank=True, effort=common_pb2.EFFORT_BALANCED),
    "balanced": Variant(effort=common_pb2.EFFORT_BALANCED),
    "thorough": Variant(),
    "thorough-nohyde": Variant(fusion={"hyde_weight": 0.0}),
    "thorough-hyde0.35": Variant(fusion={"hyde_weight": 0.35}),
    "thorough-vw0.25": Variant(fusion={"variant_weight": 0.25, "hyde_weight": 0.35}),
    "thorough-norerank-vw0.25": Variant(rerank=False, fusion={"variant_weight": 0.25, "hyde_weight": 0.35}),
    "thorough-norerank-nohyde": Variant(rerank=False, fusion={"hyde_weight": 0.0}),
    "thorough-norerank-novariants": Variant(rerank=False, fusion={"variant_weight": 0.0, "hyde_weight": 0.0}),
}
wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else list(variants)
client = gateway_client()
collection = collection_name(folder, get_settings())
queries, qrels = load_judged_queries(folder, 50)
out = {}
for name in wanted:
    r = run_mode(client, variants[name], queries, qrels, collection, False)
    out[name] = {k: r[k] for k in ("ndcg@10", "p50_ms", "expansion") if k in r}
    print(name, json.dumps(out[name]), flush=True)
