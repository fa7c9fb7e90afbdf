"""AliasService: aliases, re-indexing and switches (admin only: gateway/access/auth.py). Thin: a re-index and a switch
are gateway/resources/reindex.py's work, a generation's drop gateway/resources/drop.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from redis.exceptions import RedisError

from hybridsearch.contract.validation import check_written_collection
from hybridsearch.contract.errors import Refusal, abort_invalid
from hybridsearch.gateway.resources.aliases import AliasChanged
from hybridsearch.gateway.resources.drop import Dropper
from hybridsearch.gateway.resources.reindex import Reindexer
from hybridsearch.v1 import aliases_pb2, aliases_pb2_grpc


class AliasServicer(aliases_pb2_grpc.AliasServiceServicer):
    def __init__(self, reindexer: Reindexer, dropper: Dropper) -> None:
        self.reindexer, self.dropper = reindexer, dropper
        self.aliases = reindexer.aliases

    async def _alias(self, collection: str) -> aliases_pb2.AliasInfo:
        record = await self.aliases.get(check_written_collection(collection))
        if record is None:
            raise Refusal(f"{collection or 'default'!r} is no alias (it has not been re-indexed)",
                          grpc.StatusCode.NOT_FOUND)
        return await self.reindexer.info(record)

    async def GetAlias(self, request: aliases_pb2.GetAliasRequest,
                       context: grpc.aio.ServicerContext) -> aliases_pb2.GetAliasResponse:
        async with refusals(context):
            return aliases_pb2.GetAliasResponse(alias=await self._alias(request.collection))

    async def ListAliases(self, request: aliases_pb2.ListAliasesRequest,
                          context: grpc.aio.ServicerContext) -> aliases_pb2.ListAliasesResponse:
        async with refusals(context):
            records = await self.aliases.all()
            return aliases_pb2.ListAliasesResponse(
                aliases=[await self.reindexer.info(records[name]) for name in sorted(records)])

    async def Reindex(self, request: aliases_pb2.ReindexRequest,
                      context: grpc.aio.ServicerContext) -> AsyncIterator[aliases_pb2.ReindexResponse]:
        async with refusals(context):
            async for progress in self.reindexer.run(request):
                yield progress

    async def SwitchAlias(self, request: aliases_pb2.SwitchAliasRequest,
                          context: grpc.aio.ServicerContext) -> aliases_pb2.SwitchAliasResponse:
        async with refusals(context):
            alias = await self.reindexer.switch(request.collection, request.generation)
            return aliases_pb2.SwitchAliasResponse(alias=await self.reindexer.info(alias))

    async def RollbackAlias(self, request: aliases_pb2.RollbackAliasRequest,
                            context: grpc.aio.ServicerContext) -> aliases_pb2.RollbackAliasResponse:
        async with refusals(context):
            alias = await self.reindexer.switch(request.collection, None)
            return aliases_pb2.RollbackAliasResponse(alias=await self.reindexer.info(alias))

    async def DropGeneration(self, request: aliases_pb2.DropGenerationRequest,
                             context: grpc.aio.ServicerContext) -> aliases_pb2.DropGenerationResponse:
        async with refusals(context):
            collection = check_written_collection(request.collection)
            dropped = await self.dropper.drop_generation(collection, request.generation)
            self.reindexer.catalog.forget(collection)
            return aliases_pb2.DropGenerationResponse(dropped=dropped, alias=await self._alias(collection))


@asynccontextmanager
async def refusals(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """Refusals as their status; Redis unreachable or an alias record that kept changing as UNAVAILABLE; a
    store's error as its own status, with the store's message."""
    try:
        yield
    except Refusal as err:
        await abort_invalid(context, err)
    except (RedisError, OSError, AliasChanged) as err:
        await abort_invalid(context, Refusal(f"the alias records in Redis cannot be read or written "
                                             f"({type(err).__name__}: {err}); retry", grpc.StatusCode.UNAVAILABLE))
    except grpc.aio.AioRpcError as err:
        await abort_invalid(context, Refusal(f"a store answered {err.code().name}: {err.details()}", err.code()))
