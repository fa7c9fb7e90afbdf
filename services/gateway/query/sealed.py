"""Sealed collections on the query path (security/sealing.py): what the legs are asked, what the gateway opens.

- **Asked**: a sealed collection's stores hold metadata values and tags as keyed hashes, so the plan's
  filters and the collection's boost values are hashed with its keys before any leg or expansion sees them
  (`seal_plan`), and the tag leg is sent the hashes of the query's keywords (legs/tag.py). The stores match
  on equality as before. Hashed under every key the collection holds (CollectionSeal.digests): while
  `keys rotate` runs, records hashed under the old key and the new one are both matched.
- **Opened**: the legs answer sealed records (`LegHit.sealed`), never texts. The gateway opens only the hits
  it reranks and returns (`open_hits`, called by StoredTexts.fill for exactly those), and the chunks it reads
  back for a page (StoredTexts.chunks). The paging cache keeps no title of a sealed collection (respond.py):
  a later page opens its hits' stored chunks again.
- **Hashed terms** (`sealed_terms: hashed`): the BM25 leg sends the query's terms as keyed hashes
  (legs/bm25.py, security/hashed_terms.py). A hash has no neighbours, so a request's typo tolerance (fuzzy and
  prefix terms) is turned off for such a collection and the answer says so in a notice (HASHED_NO_TYPOS).

A sealed collection without its key, or a record that does not open, fails the search with
FAILED_PRECONDITION and the reason (SealingError), never with garbage.
"""

from __future__ import annotations

from dataclasses import replace

from hybridsearch.security.hashed_terms import hashes_terms
from hybridsearch.security.sealing import Sealer
from hybridsearch.gateway.query.keys import split_key

HASHED_NO_TYPOS = ("typo tolerance (fuzzy and prefix matching) is unavailable on a hashed-terms collection "
                   "(sealed_terms: hashed): its words were matched exactly")


def seal_plan(plan, sealer: Sealer):
    """The plan with each sealed collection's seal, hashed filters and hashed boost values (every part of a
    several-collection plan on its own; the primary as the part it is)."""
    parts = tuple(seal_plan(part, sealer) for part in plan.parts)
    seal = sealer.of(plan.collection)
    if seal is None:
        return replace(plan, parts=parts) if parts else plan
    # a boost per key the collection holds: during a rotation a record carries the hashes of its own key
    boosts = [b.model_copy(update={"value": value}) for b in plan.config.boosts
              for value in seal.hash_values(b.field, b.value)]
    typos = {"fuzzy": False, "notices": (*plan.notices, HASHED_NO_TYPOS)} if hashes_terms(seal) and plan.fuzzy else {}
    return replace(plan, parts=parts, seal=seal, filters=seal.hashed_filters(plan.filters),
                   config=plan.config.model_copy(update={"boosts": boosts}), **typos)


def open_hits(plan, hits, pool) -> None:
    """Opens, in the pool, the sealed records of these fused hits (the ones reranked or shown)."""
    for h in hits:
        seal = plan.plan_of(split_key(h.chunk_id, plan.collection)[0]).seal
        leg_hit = pool.hit(h.chunk_id)
        if seal is not None and leg_hit.HasField("sealed"):
            pool.open(h.chunk_id, seal.open_content(leg_hit.chunk_id or split_key(h.chunk_id, "")[1], leg_hit.sealed))
