"""Where the BM25 service's time goes (session 22): Bm25Servicer.Search in process (no gRPC), then the same servicer behind
the project's server (interceptors) and behind a bare grpc.aio server, client and server in this one process; CPU per
search over SciFact's 300 queries. Run with the stack stopped, on a data dir holding bench-scifact-8c1bc262:
    HYBRIDSEARCH_DATA_DIR=... .venv/bin/python docs/perf/session-s38/experiments/bm25-servicer-split.py"""
import json, time, asyncio
import grpc
from hybridsearch.config.settings import get_settings
from hybridsearch.bm25.service import Bm25Servicer, build_engine
from hybridsearch.runtime.server import create_server
from hybridsearch.runtime.in_process import InProcessContext
from hybridsearch.v1 import common_pb2, bm25_pb2_grpc
qs=[json.loads(l)["text"] for l in open("../shared/datasets/scifact/queries.jsonl")]
async def main():
    s=get_settings(); eng=build_engine(s); svc=Bm25Servicer(eng)
    C="bench-scifact-8c1bc262"
    reqs=[common_pb2.LegSearchRequest(collection=C, queries=[common_pb2.LegQuery(text=q, kind=common_pb2.QUERY_KIND_ORIGINAL)], limit=100, text_depth=20) for q in qs]
    async def with_server(interceptors: bool):
        server = create_server("bm25") if interceptors else grpc.aio.server()
        bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(svc, server)
        port = server.add_insecure_port("127.0.0.1:0"); await server.start()
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{port}"); stub = bm25_pb2_grpc.Bm25ServiceStub(ch)
        for r in reqs[:30]: await stub.Search(r, timeout=5)
        t=time.process_time()
        for r in reqs: await stub.Search(r, timeout=5)
        cpu=(time.process_time()-t)/len(reqs)*1000
        await ch.close(); await server.stop(None)
        return cpu
    for rnd in range(2):
        t=time.process_time()
        for r in reqs: await svc.Search(r, InProcessContext(5))
        inproc=(time.process_time()-t)/len(reqs)*1000
        a=await with_server(True); b=await with_server(False)
        print(f"in process {inproc:.3f}  | grpc server+client in one process: project server {a:.3f}, bare aio server {b:.3f} ms CPU a call")
asyncio.run(main())
