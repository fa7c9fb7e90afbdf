"""One collection of the sample corpus for the shell's stack tests, each document marked odd or even."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hybridsearch.cli import SAMPLE_CORPUS
from hybridsearch.corpus import read_folder


@dataclass(frozen=True)
class ShellCollection:
    name: str
    parities: dict[str, str]  # doc id -> "odd" | "even" (metadata field `parity`)


@pytest.fixture(scope="module")
def corpus(gateway) -> ShellCollection:
    docs = sorted(read_folder(SAMPLE_CORPUS), key=lambda d: d.id)
    for i, doc in enumerate(docs):
        doc.metadata["parity"] = "even" if i % 2 == 0 else "odd"
    gateway.upsert("cli-shell", docs)
    return ShellCollection("cli-shell", {doc.id: doc.metadata["parity"] for doc in docs})
