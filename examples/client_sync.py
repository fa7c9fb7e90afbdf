"""The blocking client, end to end: write two documents, search them, read the explanation, handle a
caller's mistake, delete. Run against a running stack: `python examples/client_sync.py [ADDRESS]`
(the address defaults to the configured gateway; the API key to HYBRIDSEARCH_API_KEY or the local admin key)."""

import sys

from hybridsearch.client import GatewayClient, InvalidArgument, Not, document, explain_lines

address = sys.argv[1] if len(sys.argv) > 1 else None
with GatewayClient(address) as client:
    written = client.upsert("examples", [
        document("fusion", "Reciprocal rank fusion merges ranked lists by summing 1/(k + rank).",
                 title="Rank fusion", topic="search", status="published"),
        document("draft", "Notes on reciprocal rank fusion, not reviewed yet.", title="Draft", status="draft"),
    ])
    print(f"written {written.documents_written}, unchanged {written.documents_unchanged}")

    response = client.search("how does rank fusion merge lists", collection="examples", top_k=5,
                             effort="fast", filters={"status": Not("draft")})
    for hit in response.hits:
        print(f"{hit.score:.3f} {hit.doc_id}: {hit.title}")

    explained = client.explain("rank fusion", collection="examples", mode="bm25")
    print("\n".join(explain_lines(explained)))

    try:
        client.search("rank fusion", collection="examples", top_k=1000)
    except InvalidArgument as err:  # typed: carries the gRPC code and the gateway's message
        print(f"refused: {err.code().name}: {err.details()}")

    deleted = client.delete("examples", ["draft"])
    print(f"deleted {deleted.documents_deleted}")
