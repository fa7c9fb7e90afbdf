"""A document put back together from its chunks (gateway/resources/documents.py): the chunker's own output in,
the document's words, headings and each chunk's span out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.gateway.resources.documents import assemble, heading_line
from hybridsearch.gateway.ingest.chunks import document_chunks
from hybridsearch.v1 import ingest_pb2


def chunked(text: str, words: int = 12, overlap: int = 4):
    return document_chunks(ingest_pb2.Document(id="d1", title="T", text=text, metadata={"k": "v"}), words, overlap)


def test_overlap_is_left_out_and_each_span_holds_its_chunks_words():
    text = " ".join(f"w{i}" for i in range(30))  # one paragraph over budget: cut, each next chunk overlapping
    chunks = chunked(text)
    assert len(chunks) > 2
    doc = assemble(list(reversed(chunks)), overlap_words=4)  # any order in
    assert doc.text.split() == text.split()  # every word once: the overlap is not repeated
    assert (doc.id, doc.title, dict(doc.metadata)) == ("d1", "T", {"k": "v"})
    assert [c.chunk_id for c in doc.chunks] == [c.chunk_id for c in chunks]
    for chunk, span in zip(chunks, doc.chunks):
        assert doc.text[span.start:span.end].split() == chunk.text.split()
    assert doc.chunks[1].start < doc.chunks[0].end  # the second chunk's span begins inside the first's


def test_headings_come_back_as_heading_lines_where_they_change():
    text = "# Install\n\nRun the installer now.\n\n## Linux\n\nUse the package manager.\n\n# Usage\n\nSearch."
    doc = assemble(chunked(text, words=5, overlap=0), overlap_words=0)
    assert doc.text == ("# Install\n\nRun the installer now.\n\n## Linux\n\nUse the package manager.\n\n"
                        "# Usage\n\nSearch.")
    assert [c.heading for c in doc.chunks] == ["Install", "Install > Linux", "Usage"]
    assert [doc.text[c.start:c.end] for c in doc.chunks] == ["Run the installer now.", "Use the package manager.",
                                                             "Search."]
    assert heading_line("A > B > C") == "### C"


def test_a_short_document_is_its_one_chunk():
    doc = assemble(chunked("Just one line."), overlap_words=4)
    assert doc.text == "Just one line." and (doc.chunks[0].start, doc.chunks[0].end) == (0, 14)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma.", "delta", "eps!", "zeta"]), min_size=1,
                         max_size=30), min_size=1, max_size=6),
       st.integers(3, 15), st.integers(0, 5))
def test_any_document_keeps_its_words_in_order_and_every_span_its_chunk(paragraphs, words, overlap):
    text = "\n\n".join(" ".join(p) for p in paragraphs)
    chunks = chunked(text, words, overlap)
    doc = assemble(chunks, overlap_words=overlap)
    assert doc.text.split() == text.split()
    for chunk, span in zip(chunks, doc.chunks):
        assert doc.text[span.start:span.end].split() == chunk.text.split()
