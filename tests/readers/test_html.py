from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.html import HtmlReader

PAGE = """<!doctype html><html><head><title> Release  notes </title>
<meta name="description" content="What changed"><meta name="keywords" content="release, changelog">
<style>body { color: red }</style><script>var secret = "tracking";</script></head>
<body><nav>Home</nav><h1>Version 2</h1><p>Faster <b>fusion</b>.</p><template>hidden</template></body></html>"""


def test_visible_text_title_and_meta(tmp_path):
    (tmp_path / "notes.html").write_text(PAGE)
    [doc] = HtmlReader().read(SourceFile(tmp_path / "notes.html", tmp_path))
    assert doc.title == "Release notes"
    assert "Version 2" in doc.text and "Faster" in doc.text and "fusion" in doc.text
    assert not any(s in doc.text for s in ("color", "secret", "hidden", "<p>"))
    meta = dict(doc.metadata)
    assert (meta["description"], meta["tags"], meta["type"]) == ("What changed", "release, changelog", "html")


def test_a_page_without_title_is_named_by_its_h1_or_file(tmp_path):
    (tmp_path / "a.htm").write_text("<h1>Heading</h1><p>x</p>")
    (tmp_path / "b.html").write_text("<p>only text</p>")
    [a] = HtmlReader().read(SourceFile(tmp_path / "a.htm", tmp_path))
    [b] = HtmlReader().read(SourceFile(tmp_path / "b.html", tmp_path))
    assert (a.title, b.title, b.text) == ("Heading", "b", "only text")
