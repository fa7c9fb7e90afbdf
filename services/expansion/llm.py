"""Expansion with an LLM behind any OpenAI-compatible chat endpoint (llama.cpp server, vLLM, ...).

The model must answer strict JSON; anything else is rejected and the caller falls back to PRF.
The request carries the answer's JSON schema as `response_format`, which llama.cpp turns into a
grammar, so even a 135M model cannot answer anything but that object.

The answer is streamed: a caller that gives up (its deadline passed) closes the connection, and the
server stops generating at the next token (llama.cpp's server checks for a disconnected client between
tokens; a non-streamed generation would run to max_tokens for nobody and hold the server from the next
query). The query in the prompt is capped at MAX_PROMPT_QUERY_CHARS.
"""

from __future__ import annotations

import json
import re

import httpx
from pydantic import BaseModel, Field, ValidationError, field_validator
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

PROMPT_VERSION = "v2"
SYSTEM_PROMPT = (
    "You help a search engine find documents. For the user's query write: lexical, up to 3 keyword "
    "queries using synonyms and related technical terms the query does not use; semantic, up to 2 "
    "rephrasings of the query; hyde, a 2-3 sentence passage in the style of a scientific abstract that "
    "answers the query. Answer with JSON only."
)
# One worked example: small models copy the instructions into the fields without it.
EXAMPLE_QUERY = "Query: effects of caffeine on sleep quality"
EXAMPLE_ANSWER = json.dumps({
    "lexical": ["caffeine insomnia sleep latency", "coffee consumption sleep disturbance", "adenosine antagonist sleep"],
    "semantic": ["How does caffeine intake affect sleep?", "Does drinking coffee reduce sleep quality?"],
    "hyde": "Caffeine, an adenosine receptor antagonist, prolongs sleep latency and reduces total sleep time "
            "and slow-wave sleep. In a randomized trial, 400 mg of caffeine taken six hours before bedtime "
            "reduced total sleep by more than one hour.",
})
# What llama.cpp compiles into a grammar (bounded lists keep a small model from looping).
RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {
        "lexical": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "semantic": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "hyde": {"type": "string"},
    },
    "required": ["lexical", "semantic", "hyde"],
}
JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
MAX_PROMPT_QUERY_CHARS = 500


class LlmExpansion(BaseModel):
    lexical: list[str] = Field(default_factory=list, max_length=5)
    semantic: list[str] = Field(default_factory=list, max_length=5)
    hyde: str = Field(default="", max_length=2000)

    @field_validator("lexical", "semantic")
    @classmethod
    def _clean(cls, values: list[str]) -> list[str]:
        out = []
        for v in values:
            v = " ".join(str(v).split())
            if 0 < len(v) <= 300 and v not in out:
                out.append(v)
        return out


class LlmError(RuntimeError):
    pass


def parse_expansion(content: str) -> LlmExpansion:
    match = JSON_OBJECT.search(content)
    if not match:
        raise LlmError("LLM answer holds no JSON object")
    try:
        return LlmExpansion.model_validate(json.loads(match.group(0)))
    except (json.JSONDecodeError, ValidationError) as err:
        raise LlmError(f"LLM answer is not valid expansion JSON: {err}") from err


def capped(query: str, limit: int = MAX_PROMPT_QUERY_CHARS) -> str:
    """The query as the prompt carries it: at most `limit` characters, cut at a word boundary."""
    query = " ".join(query.split())
    if len(query) <= limit:
        return query
    cut = query[:limit]
    return cut[: cut.rfind(" ")] if " " in cut else cut


class LlmExpander:
    def __init__(self, base_url: str, model: str, timeout_s: float, max_tokens: int = 320) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        self.client = httpx.AsyncClient(timeout=timeout_s)

    async def expand(self, query: str) -> LlmExpansion:
        body = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stream": True,
            "response_format": {"type": "json_object", "schema": RESPONSE_SCHEMA},
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": EXAMPLE_QUERY},
                {"role": "assistant", "content": EXAMPLE_ANSWER},
                {"role": "user", "content": f"Query: {capped(query)}"},
            ],
        }
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(2), wait=wait_exponential(multiplier=0.2, max=1),
            retry=retry_if_exception_type(httpx.TransportError), reraise=True,
        ):
            with attempt:
                content = await self._streamed(body)
        return parse_expansion(content)

    async def _streamed(self, body: dict) -> str:
        """The completion's text, read from its server-sent events; leaving early closes the stream."""
        parts: list[str] = []
        async with self.client.stream("POST", self.url, json=body) as response:
            if response.status_code != 200:
                raise LlmError(f"LLM endpoint answered HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    parts.append(json.loads(data)["choices"][0].get("delta", {}).get("content") or "")
                except (KeyError, IndexError, ValueError, AttributeError) as err:
                    raise LlmError("LLM endpoint stream is not a chat completion") from err
        return "".join(parts)

    async def close(self) -> None:
        await self.client.aclose()
