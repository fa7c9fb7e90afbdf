"""Expansion with an LLM behind any OpenAI-compatible chat endpoint (llama.cpp server, vLLM, ...).

The model must answer strict JSON; anything else is rejected and the caller falls back to PRF.
The request carries the answer's JSON schema as `response_format`, which llama.cpp turns into a
grammar, so even a 135M model cannot answer anything but that object.

The answer is streamed: a caller that gives up (its deadline passed) closes the connection, and the
server stops generating at the next token (llama.cpp's server checks for a disconnected client between
tokens; a non-streamed generation would run to max_tokens for nobody and hold the server from the next
query). The query in the prompt is capped at MAX_PROMPT_QUERY_CHARS.

Prompts per language (GNO's language-aware expansion): the query's language (text/language.py) picks
an English prompt, a native German one, or for any other language a multilingual fallback that keeps
the English instructions but asks for variants in the query's own language. Why: a small model follows
the language of its instructions and of its worked example, so an English prompt turns a German query's
keywords and passage into English, which a German BM25 analyzer (and a German-stemmed index) cannot
match; a native prompt with a native example keeps the variants in German. For languages without a
native prompt, an explicit "write in <language>" is the next best thing.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import json_repair
from pydantic import BaseModel, Field, ValidationError, field_validator
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

PROMPT_VERSION = "v2"
PROMPT_LANGUAGES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "nl": "Dutch",
                    "pt": "Portuguese", "da": "Danish", "no": "Norwegian", "sv": "Swedish", "ru": "Russian",
                    "tr": "Turkish"}
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
# What llama.cpp compiles into a grammar. Bounded lists keep a small model from looping, and bounded strings keep
# the whole object inside max_tokens: an unbounded passage ran past it, and the answer cut short held no JSON
# object (THOROUGH then degraded to PRF). 3 x 60 + 2 x 120 + 400 characters is ~300 tokens at the worst.
RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {
        "lexical": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 3},
        "semantic": {"type": "array", "items": {"type": "string", "maxLength": 120}, "maxItems": 2},
        "hyde": {"type": "string", "maxLength": 400},
    },
    "required": ["lexical", "semantic", "hyde"],
}
# An answer cut short all the same (max_tokens reached, a server without grammars) is closed where it stopped by
# json_repair: the variants it finished are kept, a passage cut mid-sentence too, a field cut before its value is
# left out (FIELD_TYPES).
FIELD_TYPES = {"lexical": list, "semantic": list, "hyde": str}
PARTIAL_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")  # an escape the cut split: "zusammengef\u00"
SYSTEM_PROMPT_DE = (
    "Du hilfst einer Suchmaschine, Dokumente zu finden. Schreibe zur Anfrage des Nutzers: lexical, bis zu 3 "
    "Stichwortanfragen mit Synonymen und verwandten Fachbegriffen, die in der Anfrage nicht vorkommen; "
    "semantic, bis zu 2 Umformulierungen der Anfrage; hyde, einen Abschnitt von 2-3 Sätzen im Stil einer "
    "wissenschaftlichen Zusammenfassung, der die Anfrage beantwortet. Schreibe alles auf Deutsch. "
    "Antworte nur mit JSON."
)
EXAMPLE_QUERY_DE = "Anfrage: Auswirkungen von Koffein auf die Schlafqualität"
EXAMPLE_ANSWER_DE = json.dumps({
    "lexical": ["Koffein Schlaflosigkeit Einschlafdauer", "Kaffeekonsum Schlafstörungen", "Adenosin-Antagonist Schlaf"],
    "semantic": ["Wie wirkt sich Koffein auf den Schlaf aus?", "Verschlechtert Kaffee die Schlafqualität?"],
    "hyde": "Koffein, ein Antagonist der Adenosinrezeptoren, verlängert die Einschlafdauer und verkürzt die "
            "Gesamtschlafzeit und den Tiefschlaf. In einer randomisierten Studie verkürzten 400 mg Koffein, "
            "sechs Stunden vor dem Schlafengehen eingenommen, den Schlaf um mehr als eine Stunde.",
}, ensure_ascii=False)
MULTILINGUAL_RULE = (
    " The query is in {language}: write every keyword query, rephrasing and the passage in {language}, "
    "never translated into English."
)


@dataclass(frozen=True)
class Prompt:
    """The messages before the user's query, and how that query is introduced."""

    system: str
    example_query: str
    example_answer: str
    query_label: str

    def messages(self, query: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.example_query},
            {"role": "assistant", "content": self.example_answer},
            {"role": "user", "content": f"{self.query_label}: {capped(query)}"},
        ]


NATIVE_PROMPTS = {
    "en": Prompt(SYSTEM_PROMPT, EXAMPLE_QUERY, EXAMPLE_ANSWER, "Query"),
    "de": Prompt(SYSTEM_PROMPT_DE, EXAMPLE_QUERY_DE, EXAMPLE_ANSWER_DE, "Anfrage"),
}


def prompt_for(language: str) -> Prompt:
    """The native prompt of `language`, else the multilingual fallback naming the language."""
    if language in NATIVE_PROMPTS:
        return NATIVE_PROMPTS[language]
    name = PROMPT_LANGUAGES.get(language, "the query's own language")
    return Prompt(SYSTEM_PROMPT + MULTILINGUAL_RULE.format(language=name), EXAMPLE_QUERY, EXAMPLE_ANSWER, "Query")


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
    """The expansion an answer holds (chatter around it allowed); one cut short is closed where it stopped."""
    start = content.find("{")
    if start < 0:
        raise LlmError("LLM answer holds no JSON object")
    if match := JSON_OBJECT.search(content):
        try:
            return LlmExpansion.model_validate(json.loads(match.group(0)))
        except ValidationError as err:
            raise LlmError(f"LLM answer is not valid expansion JSON: {err}") from err
        except json.JSONDecodeError:
            pass  # an object cut short, with a brace inside it: closed below
    closed = json_repair.loads(PARTIAL_ESCAPE.sub("", content[start:].rstrip()))
    if not isinstance(closed, dict):
        raise LlmError("LLM answer is not valid expansion JSON, and cut short where it cannot be closed")
    fields = {name: value for name, value in closed.items() if isinstance(value, FIELD_TYPES.get(name, ()))}
    try:
        expansion = LlmExpansion.model_validate(fields)
    except ValidationError as err:
        raise LlmError(f"LLM answer is not valid expansion JSON: {err}") from err
    if not (expansion.lexical or expansion.semantic or expansion.hyde):
        raise LlmError("LLM answer was cut short before its first variant")
    return expansion


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

    def request(self, query: str, language: str = "en") -> dict:
        """The chat completion asked for: streamed, the answer constrained to RESPONSE_SCHEMA."""
        return {
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stream": True,
            "response_format": {"type": "json_object", "schema": RESPONSE_SCHEMA},
            "messages": prompt_for(language).messages(query),
        }

    async def expand(self, query: str, language: str = "en") -> LlmExpansion:
        body = self.request(query, language)
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(2), wait=wait_exponential(multiplier=0.2, max=1),
            retry=retry_if_exception_type(httpx.TransportError), reraise=True,
        ):
            with attempt:
                content = "".join([piece async for piece in self.pieces(body)])
        return parse_expansion(content)

    async def pieces(self, body: dict) -> AsyncIterator[str]:
        """The completion's text as the server sends it, read from its server-sent events; leaving early closes
        the stream."""
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
                    yield json.loads(data)["choices"][0].get("delta", {}).get("content") or ""
                except (KeyError, IndexError, ValueError, AttributeError) as err:
                    raise LlmError("LLM endpoint stream is not a chat completion") from err

    async def close(self) -> None:
        await self.client.aclose()
