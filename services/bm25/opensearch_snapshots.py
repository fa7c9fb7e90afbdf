"""Snapshots of a collection on OpenSearch through the cluster's own snapshot API.

OpenSearch cannot hand out its index files, so the cluster takes the snapshot into a repository registered in
it (`PUT _snapshot/<name>`: a shared filesystem, S3 through repository-s3, ...), named by
`bm25.opensearch_snapshot_repository`; the BM25 part of a hybridsearch snapshot is one small record naming
that snapshot (`opensearch-snapshot.json`: repository, snapshot, index, uuid), stored with its checksum like
any other file. The cluster's snapshots are incremental by segment, as the embedded engines' pieces are.

- **capture**: the index is flushed (every acknowledged write in a Lucene commit), then snapshotted alone
  (`include_global_state: false`) with `wait_for_completion`, while the gateway holds the collection's writes.
  A snapshot whose shards did not all succeed is EngineUnavailable (the create fails, nothing is kept).
- **check**: at a restore's PREPARE, the cluster must hold the recorded snapshot, whole (state SUCCESS), so a
  snapshot the cluster lost is refused before the other store moves anything in.
- **install**: the recorded index restored under the target's index name (`rename_pattern`), waited for
  until its shards recover (yellow or better).

The record names the cluster repository, not its contents: `hybridsearch snapshot delete` removes the record,
not the cluster's snapshot (`DELETE _snapshot/<repository>/<snapshot>`, or the cluster's own retention: its
snapshot lifecycle policy). Tested against noida-db, a process speaking the Elasticsearch 8 REST API
(tests/bm25/test_opensearch_snapshots.py); OpenSearch itself does not run here.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

from opensearchpy.exceptions import NotFoundError

from hybridsearch.storage.stores import CollectionExists, EngineUnavailable, SnapshotMissing, SnapshotsUnsupported

RECORD = "opensearch-snapshot.json"


def _repository(engine) -> str:
    if not engine.snapshot_repository:
        raise SnapshotsUnsupported(
            f"{engine.name}: snapshots of an OpenSearch store are taken by the cluster into a repository registered "
            "in it (PUT _snapshot/NAME); set bm25.opensearch_snapshot_repository to its name")
    return engine.snapshot_repository


def _failed_shards(answer: dict) -> int:
    return int((answer.get("shards") or {}).get("failed", 0) or 0)


async def capture(engine, collection: str, folder: Path) -> bool:
    """The collection's index snapshotted by the cluster; `folder` gets the record naming that snapshot."""
    repository = _repository(engine)
    if not await engine._exists(collection):
        return False
    index = engine.index(collection)
    await engine._call("flush", lambda: engine.client.indices.flush(index=index), retry=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = f"{index}-{stamp}-{uuid.uuid4().hex[:8]}".lower()  # snapshot names are lowercase
    answer = await engine._call("snapshot", lambda: engine.client.snapshot.create(
        repository=repository, snapshot=name, body={"indices": index, "include_global_state": False},
        params={"wait_for_completion": "true"}))
    taken = answer.get("snapshot") or {}
    if taken.get("state") != "SUCCESS" or _failed_shards(taken):
        raise EngineUnavailable(f"{engine.name}: the cluster's snapshot {name} of {index} ended {taken.get('state')} "
                                f"with {_failed_shards(taken)} failed shards")
    record = {"repository": repository, "snapshot": name, "index": index, "uuid": taken.get("uuid", "")}
    await asyncio.to_thread(_write_record, folder, record)
    return True


def _write_record(folder: Path, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RECORD).write_text(json.dumps(record, sort_keys=True))


def _read_record(folder: Path) -> dict:
    try:
        record = json.loads((folder / RECORD).read_text())
        return {key: str(record[key]) for key in ("repository", "snapshot", "index")}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SnapshotMissing(f"the snapshot's BM25 part holds no OpenSearch snapshot record ({RECORD}: "
                              f"{type(err).__name__}): it was not taken on OpenSearch") from None


async def check(engine, folder: Path) -> None:
    """SnapshotMissing unless the cluster holds the recorded snapshot whole."""
    record = _read_record(folder)
    try:
        answer = await engine._call("snapshot look-up", lambda: engine.client.snapshot.get(
            repository=record["repository"], snapshot=record["snapshot"]))
    except EngineUnavailable as err:
        if isinstance(err.__cause__, NotFoundError):  # no such repository or snapshot: it will not come back
            raise SnapshotMissing(f"the cluster holds no snapshot {record['snapshot']} in repository "
                                  f"{record['repository']!r} ({err.__cause__.error})") from None
        raise
    found = [s for s in answer.get("snapshots", []) if s.get("snapshot") == record["snapshot"]]
    if not found or found[0].get("state") != "SUCCESS" or record["index"] not in found[0].get("indices", []):
        state = found[0].get("state") if found else "absent"
        raise SnapshotMissing(f"the cluster's snapshot {record['snapshot']} in {record['repository']!r} is {state}, "
                              f"not a whole snapshot of {record['index']}")


async def install(engine, collection: str, folder: Path) -> None:
    """The recorded snapshot restored as the collection's index; CollectionExists when it exists."""
    record = _read_record(folder)
    target = engine.index(collection)
    if await engine._exists(collection):
        raise CollectionExists(f"{engine.name} already holds collection {collection!r}")
    answer = await engine._call("restore", lambda: engine.client.snapshot.restore(
        repository=record["repository"], snapshot=record["snapshot"],
        body={"indices": record["index"], "rename_pattern": f"^{re.escape(record['index'])}$",
              "rename_replacement": target, "include_global_state": False, "include_aliases": False},
        params={"wait_for_completion": "true"}))
    if _failed_shards(answer.get("snapshot") or {}):
        raise EngineUnavailable(f"{engine.name}: restoring {record['snapshot']} as {target}: "
                                f"{_failed_shards(answer['snapshot'])} shards failed")
    health = await engine._call("restore health", lambda: engine.client.cluster.health(index=target,
                                                                                       wait_for_status="yellow"))
    if health.get("timed_out"):  # still recovering: the mark stays, and the restore run again finds it done
        raise EngineUnavailable(f"{engine.name}: {target} restored from {record['snapshot']} is {health.get('status')}, "
                                "its shards still recovering")
    engine.forget(collection)
