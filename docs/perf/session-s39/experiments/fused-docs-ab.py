"""fused_docs built directly (tried in session 23, not kept: defined here) against the columns filled and read back
(fusion.packed.fused_docs, as it is), in process:
FAST's two lists of 100 (BM25 and vector, 60 documents in both), z-score and RRF, the same documents out, the CPU
of each (median of 12 alternated rounds of 2,000 calls).
    .venv/bin/python docs/perf/session-s39/experiments/fused-docs-ab.py"""
import random
import statistics
import time

from hybridsearch.fusion.methods import FusionMethod, FusionParams
import numpy as np

from hybridsearch.fusion.packed import KIND_ENUM, FusedDoc, LegEvidence, pack_fused, unpack_fused
from hybridsearch.fusion.service import fuse_lists
from hybridsearch.v1 import common_pb2



def _float32(values):
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).tolist()


def fused_docs(fused):
    """The documents a packed reply would have given, built directly (the scores as 32-bit floats)."""
    evidence_scores = _float32([e.score for f in fused for e in f.evidence])
    docs, at = [], 0
    for f, score, normalized in zip(fused, _float32([f.score for f in fused]), _float32([f.normalized for f in fused])):
        end = at + len(f.evidence)
        docs.append(FusedDoc(f.doc_id, f.chunk_id, score, normalized, [
            LegEvidence(e.leg, KIND_ENUM[e.kind], e.rank, s) for e, s in zip(f.evidence, evidence_scores[at:end])]))
        at = end
    return docs


rng = random.Random(7)
docs = [f"doc{i}" for i in range(140)]


def ranked(leg, chosen):
    scores = sorted((rng.uniform(0, 30) for _ in chosen), reverse=True)
    return common_pb2.RankedList(leg=leg, kind=common_pb2.QUERY_KIND_ORIGINAL, hits=[
        common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", score=s, rank=r) for r, (d, s) in enumerate(zip(chosen, scores), 1)])


lists = [ranked(common_pb2.LEG_BM25, docs[:100]), ranked(common_pb2.LEG_VECTOR, docs[40:140])]
for method in (FusionMethod.ZSCORE, FusionMethod.RRF):
    fused = fuse_lists(lists, FusionParams(method=method), 100)
    old, new = unpack_fused(pack_fused(fused)), fused_docs(fused)
    assert old == new, "the same documents"
    spent = {"columns and back": [], "direct": []}
    for _ in range(12):
        for name, build in (("columns and back", lambda: unpack_fused(pack_fused(fused))), ("direct", lambda: fused_docs(fused))):
            t = time.thread_time()
            for _ in range(2000):
                build()
            spent[name].append((time.thread_time() - t) / 2000 * 1000)
    print(method.value, ", ".join(f"{name} {statistics.median(v):.4f} ms" for name, v in spent.items()),
          f"({len(fused)} documents, equal)")
