"""Bm25Service: validates requests and hands them to the configured LexicalEngine."""

from __future__ import annotations

import grpc

from hybridsearch.bm25.engine import LexicalEngine
from hybridsearch.common.config import Settings, get_settings
from hybridsearch.common.server import serve
from hybridsearch.common.store_servicer import StoreServicerMixin, check_leg_search
from hybridsearch.common.validation import InvalidArgument, abort_invalid
from hybridsearch.v1 import bm25_pb2, bm25_pb2_grpc, common_pb2


def build_engine(settings: Settings) -> LexicalEngine:
    cfg = settings.bm25
    if cfg.engine == "embedded":
        from hybridsearch.bm25.embedded import EmbeddedBm25Engine

        return EmbeddedBm25Engine(settings.data_dir / "bm25", cfg.k1, cfg.b, cfg.stemmer, cfg.stopwords, cfg.title_boost)
    raise ValueError(f"unknown bm25 engine {cfg.engine!r} (embedded)")


class Bm25Servicer(StoreServicerMixin, bm25_pb2_grpc.Bm25ServiceServicer):
    def __init__(self, engine: LexicalEngine) -> None:
        self.engine = engine

    async def Search(self, request, context):
        try:
            collection, filters = check_leg_search(request)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        lists = await self.engine.search(collection, [q.text for q in request.queries], request.limit, filters)
        return common_pb2.LegSearchResponse(
            engine=self.engine.name,
            lists=[
                common_pb2.RankedList(leg=common_pb2.LEG_BM25, kind=q.kind, query=q.text, hits=hits)
                for q, hits in zip(request.queries, lists)
            ],
        )


async def main() -> None:
    settings = get_settings()
    engine = build_engine(settings)

    async def register(server: grpc.aio.Server) -> list[str]:
        bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(Bm25Servicer(engine), server)
        return [bm25_pb2.DESCRIPTOR.services_by_name["Bm25Service"].full_name]

    await serve("bm25", settings.endpoints.bm25_port, register, on_stop=engine.close)
