"""What a leg list of 100 hits (20 with their texts) costs as messages (session 22): the service building it from
built hits (BuiltHits copies), serialising, the gateway parsing it, its pool and fusion reading it.
    .venv/bin/python docs/perf/session-s38/experiments/leg-list-cost.py"""
import time
from hybridsearch.v1 import common_pb2
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.fusion.service import rankings_of
text="Lorem ipsum dolor sit amet consectetur " * 40
protos=[]
for r in range(100):
    h=common_pb2.LegHit(chunk_id=f"{r*37}#0", doc_id=str(r*37), score=10-r*0.01, rank=r+1, span=common_pb2.SourceSpan(start_char=0,end_char=1600,start_line=1,end_line=9))
    if r<20: h.title="A title of a document"; h.text=text
    protos.append(h)
def build():
    rl=common_pb2.RankedList(leg=1, kind=1, query="q")
    for r,p in enumerate(protos):
        h=rl.hits.add(); h.CopyFrom(p); h.score=10-r*0.01; h.rank=r+1
    return common_pb2.LegSearchResponse(lists=[rl], engine="x")
def t(f,n=3000):
    s=time.process_time()
    for _ in range(n): f()
    return (time.process_time()-s)/n*1e3
resp=build(); raw=resp.SerializeToString()
print("server: build 100 hits", round(t(build),3), "ms; serialize", round(t(resp.SerializeToString),3), "ms; bytes", len(raw))
print("client: parse", round(t(lambda: common_pb2.LegSearchResponse.FromString(raw)),3))
r2=common_pb2.LegSearchResponse.FromString(raw)
def pooladd():
    p=Pool(); p.add(list(r2.lists))
print("client: Pool.add", round(t(pooladd),3))
print("client: rankings_of", round(t(lambda: rankings_of(list(r2.lists), False)),3))
