"""ExpansionService: skip on strong signals, else LLM (THOROUGH, when configured) or PRF, cached.

Every answer names the query's language (text/language.py: the request's override, else detected,
else the collection's): it picks the LLM prompt (English, German, multilingual). What decides it (the query,
the override, the collection's language) is in the cache key, so a cached answer names its language without
a detection. PRF reads the collection's documents, so it stems and drops stopwords in the documents' language:
the collection's declared one (an English collection's feedback is exactly what it was), the query's
for an `auto` collection (documents of every language).

The PRF path and the dominant-top-hit check both need the query's best BM25 hits, so the service
probes the BM25 service itself; the gateway can then call expansion concurrently with both legs.
A hashed-terms collection (sealed_terms: hashed) is probed with its query's keyed term hashes, exactly
(security/hashed_terms.py); its feedback terms come from the opened feedback texts as a clear collection's
do, and the variants are clear queries the gateway's BM25 leg hashes in turn (sealed in the cache).
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from hybridsearch.bm25.analyzer import Analyzers
from hybridsearch.config.collections import collection_config
from hybridsearch.config.search import ExpansionSettings
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.query.effort import Expansion, effort_policy, why_not_expand
from hybridsearch.text.language import DETECTOR, Detection, check_language, documents_language, query_language
from hybridsearch.runtime.server import internal_channel, serve
from hybridsearch.runtime.telemetry import tracer
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.security.sealing import CollectionSeal, Sealer, SealingError
from hybridsearch.contract.validation import check_collection, check_filters
from hybridsearch.contract.errors import InvalidArgument, Refusal, abort_invalid
from hybridsearch.expansion.cache import ExpansionCache
from hybridsearch.security.acl import of_request, readers_key
from hybridsearch.expansion.llm import PROMPT_VERSION, LlmError, LlmExpander
from hybridsearch.expansion.prf import feedback_terms, prf_variants
from hybridsearch.expansion.signals import dominant_top_hit, strong_signal
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2, expansion_pb2, expansion_pb2_grpc

log = logging.getLogger(__name__)
MAX_QUERY_CHARS = 8192
PROBE_HITS = 10
# A failed probe's status passed on as it is; any other becomes UNAVAILABLE (the caller may retry).
PASSED_ON = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
             grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED)
LLM_DEADLINE_MARGIN_S = 1.0


class ExpansionServicer(expansion_pb2_grpc.ExpansionServiceServicer):
    """Served by its own process (main), or inside the gateway's (expansion.in_process, topology.in_gateway), where
    its BM25 probes go over the gateway's channel (`bm25`)."""

    def __init__(self, settings: Settings, bm25: bm25_pb2_grpc.Bm25ServiceStub | None = None) -> None:
        self.cfg: ExpansionSettings = settings.expansion
        self.settings = settings
        self.analyzers = Analyzers(settings.bm25.stemmer, settings.bm25.stopwords)
        self.cache = ExpansionCache(settings.redis.cache_at, self.cfg.cache_ttl_s)
        self.llm = (
            LlmExpander(self.cfg.llm_url, self.cfg.llm_model, self.cfg.llm_timeout_s, self.cfg.llm_max_tokens)
            if self.cfg.llm_url else None
        )
        self.bm25 = bm25 or bm25_pb2_grpc.Bm25ServiceStub(internal_channel(settings.endpoints.addr("bm25")))
        self.sealer = Sealer(settings)  # sealed collections: the probe's texts opened, cache entries sealed
        self.terms = HashedTerms(settings.bm25)  # hashed-terms collections: the probe's query hashed
        self.tracer = tracer(__name__)

    def _generator(self, effort: int) -> str:
        if self.llm is not None and effort_policy(effort).expansion is Expansion.LLM:
            return f"llm:{self.cfg.llm_model}"
        return "prf"

    async def Expand(self, request: expansion_pb2.ExpandRequest, context) -> expansion_pb2.ExpandResponse:
        try:
            if not request.query.strip():
                raise InvalidArgument("query is empty")
            if len(request.query) > MAX_QUERY_CHARS:
                raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters")
            collection = check_collection(request.collection)
            filters = check_filters(request.filters)
            if request.effort not in common_pb2.Effort.values():
                raise InvalidArgument(f"unknown effort {request.effort}")
            declared = collection_config(self.settings, collection).language
            requested = check_language(request.language) if request.language else ""
            seal = self.sealer.of(collection)  # SealingError: a sealed collection without its key
        except Refusal as err:
            await abort_invalid(context, err)
        try:
            return await self._answer(request, collection, filters, declared, requested, context, seal)
        except SealingError as err:  # a feedback record that does not open: the reason, not garbage
            await abort_invalid(context, err)

    async def _answer(self, request, collection, filters, declared: str, requested: str,
                      context, seal: CollectionSeal | None = None) -> expansion_pb2.ExpandResponse:
        """The answer, its query's language named (text/language.py). The language is detected only where the
        answer is made, not for a cached one, which names the language it was made in: the detection (~0.3 ms
        a SciFact query) is a function of the query, the request's override and the collection's language, all
        in the key."""
        def detect() -> Detection:
            return query_language(request.query, declared, requested)

        # The same rule the gateway's plan used (query.effort.why_not_expand): decided once.
        if (why := why_not_expand(request.effort, True if request.force else None, self.cfg.prf_in_balanced)):
            return _in_language(expansion_pb2.ExpandResponse(skipped=True, skip_reason=why, generator="none",
                                                             cache_available=self.cache.available), detect())
        reason = strong_signal(request.query)
        if reason:
            return _in_language(expansion_pb2.ExpandResponse(skipped=True, skip_reason=reason, generator="none",
                                                             cache_available=self.cache.available), detect())
        generator = self._generator(request.effort)
        key = self.cache.key(
            collection, request.query, generator, self.cfg.prompt_version, PROMPT_VERSION,
            f"prf={self.cfg.prf_docs}/{self.cfg.prf_terms}", filters_key(filters),
            f"lang={requested or 'detected'}/{declared}",
            *(["fuzzy"] if request.fuzzy else []),  # appended: keys without typo tolerance stay as they were
            # whom the probe read for: one reader's feedback (or skip) is never another's (security/acl.py)
            *([readers_key(readers)] if (readers := of_request(request)) is not None else []),
            seal=seal,
        )
        with self.tracer.start_as_current_span("expansion.cache_get") as span:
            cached = await self.cache.get(key, seal)
            span.set_attribute("cache.hit", cached is not None)
        if cached is not None:
            response = expansion_pb2.ExpandResponse(**cached)
            response.cache_hit = True
            response.cache_available = True
            return response if response.language else _in_language(response, detect())

        language = detect()
        response = _in_language(await self._expand(request.query, collection, filters, generator, language.language,
                                                   documents_language(declared, language), context, request.fuzzy,
                                                   seal, readers), language)
        # A fallback's variants are not what the key names (the LLM's): the next query tries the LLM again.
        if (response.generator != "none" or response.skipped) and not response.fallback_reason:
            await self.cache.put(key, _to_dict(response), seal)
        response.cache_available = self.cache.available
        return response

    async def _expand(self, query, collection, filters, generator, language, documents_language,
                      context, fuzzy=False, seal: CollectionSeal | None = None,
                      readers: common_pb2.Readers | None = None) -> expansion_pb2.ExpandResponse:
        hashed = hashes_terms(seal)
        try:
            probe = await self.bm25.Search(
                common_pb2.LegSearchRequest(
                    collection=collection, limit=PROBE_HITS, filters=filters, fuzzy=fuzzy and not hashed,
                    queries=[common_pb2.LegQuery(text=self.terms.query(seal, query) if hashed else query,
                                                 kind=common_pb2.QUERY_KIND_ORIGINAL)],
                    readers=readers,  # feedback only from documents the caller may read
                ),
                timeout=_remaining(context),
            )
        except grpc.aio.AioRpcError as err:
            # the BM25 store down or late: its status, never UNKNOWN (the gateway reports the leg with it)
            code = err.code() if err.code() in PASSED_ON else grpc.StatusCode.UNAVAILABLE
            await context.abort(code, f"the BM25 probe for feedback documents failed ({err.code().name}: "
                                      f"{err.details()}); retry")
        hits = list(probe.lists[0].hits) if probe.lists else []
        if dominant_top_hit([h.score for h in hits], self.cfg.dominant_ratio, self.cfg.dominant_min_score):
            return expansion_pb2.ExpandResponse(skipped=True, skip_reason="dominant BM25 top hit", generator="none")

        fallback = ""
        if generator.startswith("llm:"):
            try:
                # Leave time for the PRF fallback and the variant legs inside the caller's deadline.
                budget = max(0.05, _remaining(context) - LLM_DEADLINE_MARGIN_S)
                with self.tracer.start_as_current_span("expansion.llm"):
                    out = await asyncio.wait_for(self.llm.expand(query, language), timeout=budget)
                if not (out.lexical or out.semantic or out.hyde):
                    raise LlmError("LLM answered an empty expansion")
                return expansion_pb2.ExpandResponse(
                    lexical_variants=out.lexical, semantic_variants=out.semantic, hyde=out.hyde, generator=generator
                )
            except Exception as err:  # any LLM failure (timeout, HTTP, bad JSON) degrades to PRF, flagged
                log.warning("LLM expansion failed, using PRF: %s", err)
                fallback = f"LLM failed ({type(err).__name__}{': ' + str(err)[:200] if str(err) else ''}): feedback variants instead"
                generator = f"prf (llm failed: {type(err).__name__})"

        feedback = hits[: self.cfg.prf_docs]
        if seal is not None:  # a sealed collection's probe answers sealed records: its feedback texts opened here
            feedback = [_opened(seal, h) for h in feedback]
        own = self.analyzers.language(language).stopwords if language != documents_language else frozenset()
        terms = feedback_terms(query, [(h.title + " " + h.text, h.score) for h in feedback],
                               self.analyzers.language(documents_language), self.cfg.prf_terms, own)
        lexical, semantic = prf_variants(query, terms)
        if not lexical:
            return expansion_pb2.ExpandResponse(skipped=True, skip_reason="no feedback documents", generator="none",
                                                fallback_reason=fallback)
        return expansion_pb2.ExpandResponse(lexical_variants=lexical, semantic_variants=semantic, generator=generator,
                                            fallback_reason=fallback)

    async def start(self) -> None:
        """Before the first query: the detector's models loaded (~3 s, not in a query's deadline); the cache's Redis
        looked for."""
        await asyncio.to_thread(DETECTOR.warm)
        if await self.cache.ping():
            log.info("expansion cache: Redis at %s", self.settings.redis.cache_at)
        else:
            log.warning("expansion cache: NO Redis at %s — running uncached", self.settings.redis.cache_at)

    async def close(self) -> None:
        await self.cache.close()
        if self.llm is not None:
            await self.llm.close()


def _opened(seal: CollectionSeal, hit: common_pb2.LegHit) -> common_pb2.LegHit:
    if not hit.HasField("sealed"):
        return hit
    content = seal.open_content(hit.chunk_id, hit.sealed)
    return common_pb2.LegHit(chunk_id=hit.chunk_id, score=hit.score, title=content.title, text=content.text)


def filters_key(filters) -> str:
    return "|".join(sorted(f.SerializeToString(deterministic=True).hex() for f in filters))


def _to_dict(response: expansion_pb2.ExpandResponse) -> dict:
    return {
        "lexical_variants": list(response.lexical_variants), "semantic_variants": list(response.semantic_variants),
        "hyde": response.hyde, "skipped": response.skipped, "skip_reason": response.skip_reason,
        "generator": response.generator, "language": response.language, "language_source": response.language_source,
        "language_confidence": response.language_confidence,
    }


def _in_language(response: expansion_pb2.ExpandResponse, language: Detection) -> expansion_pb2.ExpandResponse:
    response.language, response.language_source = language.language, language.source
    response.language_confidence = language.confidence
    return response


def _remaining(context) -> float | None:
    remaining = context.time_remaining()
    return max(0.05, remaining) if remaining is not None else 5.0


async def main() -> None:
    settings = get_settings()
    servicer = ExpansionServicer(settings)
    await servicer.start()

    async def register(server: grpc.aio.Server) -> list[str]:
        expansion_pb2_grpc.add_ExpansionServiceServicer_to_server(servicer, server)
        return [expansion_pb2.DESCRIPTOR.services_by_name["ExpansionService"].full_name]

    await serve("expansion", settings.endpoints.expansion_port, register, on_stop=servicer.close)
