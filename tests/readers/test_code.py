"""Source code: one section a declaration (tree-sitter), with its symbol and kind; nothing of the file lost."""

import pytest

from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.code import CodeReader

FILES = {
    "app.py": '''import os

LIMIT = 3


@cache
def load_config(path):
    """Reads the config."""
    return open(path).read()


class Parser:
    kind = "x"

    def parse(self, text):
        return text.split()
''',
    "server.go": '''package main

type Server struct {
    port int
}

func (s *Server) Run() error {
    return nil
}

func main() {
}
''',
    "Shop.java": '''package shop;

public class Cart {
    private int items;

    public Cart() { items = 0; }

    public int total(int price) {
        return items * price;
    }
}
''',
    "ui.ts": '''import { x } from "./x";

export interface Props { name: string }

export const render = (p: Props): string => p.name;

export class Widget {
  draw(): void {}
}
''',
    "util.js": '''function add(a, b) { return a + b; }
const mul = function (a, b) { return a * b; };
const LIMIT = 3;
''',
}
EXPECTED = {
    "app.py": [("", "module", ""), ("def load_config", "def", "load_config"), ("class Parser", "class", "Parser"),
               ("class Parser > def parse", "def", "Parser.parse")],
    "server.go": [("", "module", ""), ("type Server", "type", "Server"), ("func Server.Run", "func", "Server.Run"),
                  ("func main", "func", "main")],
    "Shop.java": [("", "module", ""), ("class Cart", "class", "Cart"), ("class Cart > constructor Cart", "constructor",
                  "Cart.Cart"), ("class Cart > method total", "method", "Cart.total")],
    "ui.ts": [("", "module", ""), ("interface Props", "interface", "Props"), ("function render", "function", "render"),
              ("class Widget", "class", "Widget"), ("class Widget > method draw", "method", "Widget.draw")],
    "util.js": [("function add", "function", "add"), ("function mul", "function", "mul"), ("", "module", "")],
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_declarations_become_sections_with_symbols(tmp_path, name):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_text(FILES[name])
    [doc] = CodeReader().read(SourceFile(tmp_path / "src" / name, tmp_path))
    assert doc.title == f"src/{name}" and doc.text == FILES[name]
    got = [(s.heading, s.metadata["symbol_kind"], s.metadata.get("symbol", "")) for s in doc.sections]
    assert got == EXPECTED[name]
    # In order, inside the text, and together they hold every word of the file (lone closing braces aside).
    assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:]))
    words = [w for w in doc.text.split() if w != "}"]
    assert [w for w in " ".join(doc.text[s.start:s.end] for s in doc.sections).split() if w != "}"] == words


def test_a_decorated_function_keeps_its_decorator_and_offsets_count_code_points(tmp_path):
    source = '# ünïcödé\n\n@cache\ndef f():\n    return "é"\n'
    (tmp_path / "u.py").write_text(source)
    [doc] = CodeReader().read(SourceFile(tmp_path / "u.py", tmp_path))
    f = next(s for s in doc.sections if s.metadata.get("symbol") == "f")
    assert doc.text[f.start:f.end] == '@cache\ndef f():\n    return "é"'
