"""One request to the OpenSearch cluster: retried with backoff when the transport failed or the cluster said
429/502/503/504 (writes and reads that are safe to repeat), and any failure made EngineUnavailable (the BM25
service answers UNAVAILABLE: the gateway marks the leg failed), naming what was asked and where."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from opensearchpy import helpers
from opensearchpy.exceptions import ConnectionError as TransportConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError, OpenSearchException, TransportError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from hybridsearch.storage.stores import EngineUnavailable

T = TypeVar("T")
RETRYABLE_STATUS = {429, 502, 503, 504}


def retryable(err: BaseException) -> bool:
    if isinstance(err, (TransportConnectionError, ConnectionTimeout)):
        return True
    return isinstance(err, TransportError) and err.status_code in RETRYABLE_STATUS


async def cluster_call(what: str, request: Callable[[], Awaitable[T]], url: str, timeout_s: float, attempts: int = 0,
                       on_not_found: Callable[[], None] = lambda: None) -> T:
    """Runs one client request, `attempts` times at most when it may be repeated (0: once); transport failures
    become EngineUnavailable (a bulk's own errors pass through: the caller reads them)."""
    try:
        if not attempts:
            return await request()
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(attempts), wait=wait_exponential(multiplier=0.2, max=5),
            retry=retry_if_exception(retryable), reraise=True,
        ):
            with attempt:
                return await request()
    except helpers.BulkIndexError:
        raise
    except NotFoundError as err:
        on_not_found()  # an index deleted behind the engine's back: it looks again next time
        raise EngineUnavailable(f"opensearch {what} at {url}: not found: {err}") from err
    except ConnectionTimeout as err:
        raise EngineUnavailable(f"opensearch {what} at {url} timed out after {timeout_s}s") from err
    except (OpenSearchException, TransportError) as err:
        raise EngineUnavailable(f"opensearch {what} at {url} failed: {err}") from err
    raise AssertionError("unreachable")
