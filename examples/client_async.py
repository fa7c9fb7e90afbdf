"""The asyncio client: the same methods, awaited; several searches in flight on one channel.
Run against a running stack: `python examples/client_async.py [ADDRESS]`."""

import asyncio
import sys

from hybridsearch.client import AsyncGatewayClient, document


async def main(address: str | None) -> None:
    async with AsyncGatewayClient(address) as client:
        await client.upsert_stream("examples-async", [
            document(f"doc-{i}", f"Passage {i} about {topic}.", topic=topic)
            for i, topic in enumerate(["vector search", "bm25 scoring", "rank fusion", "reranking"])
        ])
        queries = ["vector search", "bm25", "fusion of ranked lists"]
        answers = await asyncio.gather(*(client.search(q, collection="examples-async", top_k=2, effort="fast",
                                                       timeout=10) for q in queries))
        for query, response in zip(queries, answers):
            print(query, "->", [hit.doc_id for hit in response.hits])
        stats = await client.stats("examples-async")
        print("documents:", ", ".join(f"{s.store} {s.documents}" for s in stats.stores))


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
