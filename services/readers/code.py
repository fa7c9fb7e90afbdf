"""Source code (tree-sitter and its packaged grammars): a file is one document titled by its path, cut
into sections at its functions, methods and classes, as CodeRAG chunks code. Each section's chunks carry
`symbol` (the declaration's name, `Class.method` for a member) and `symbol_kind` as fields, and the
declaration path ("class Parser > def parse") as their heading, which both legs index with the text; a
class's own lines (its header, its fields) are a section of their own, the module's lines between
declarations (imports, constants) one each. A collection declaring `fields: {symbol: 1.5, path: 0.5}`
weighs names and paths as CodeRAG does (docs/client.md "Indexing folders")."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter

from hybridsearch.readers.base import SourceFile
from hybridsearch.v1 import ingest_pb2


@dataclass(frozen=True)
class Grammar:
    language: Callable[[], object]               # the packaged grammar's language()
    declarations: dict[str, str]                 # node type -> kind (def, class, func, ...)
    wrappers: dict[str, str]                     # node type -> field holding the declaration (decorators, export)
    bodies: frozenset[str] = frozenset({"body"})  # a container's field holding its members


def _python():
    import tree_sitter_python
    return tree_sitter_python.language()


def _go():
    import tree_sitter_go
    return tree_sitter_go.language()


def _java():
    import tree_sitter_java
    return tree_sitter_java.language()


def _javascript():
    import tree_sitter_javascript
    return tree_sitter_javascript.language()


def _typescript():
    import tree_sitter_typescript
    return tree_sitter_typescript.language_typescript()


def _tsx():
    import tree_sitter_typescript
    return tree_sitter_typescript.language_tsx()


JS_DECLARATIONS = {"function_declaration": "function", "generator_function_declaration": "function",
                   "class_declaration": "class", "method_definition": "method", "lexical_declaration": "function"}
TS_DECLARATIONS = {**JS_DECLARATIONS, "abstract_class_declaration": "class", "interface_declaration": "interface",
                   "type_alias_declaration": "type", "enum_declaration": "enum"}
JS_WRAPPERS = {"export_statement": "declaration"}

GRAMMARS = {
    "python": Grammar(_python, {"function_definition": "def", "class_definition": "class"},
                      {"decorated_definition": "definition"}),
    "go": Grammar(_go, {"function_declaration": "func", "method_declaration": "func", "type_declaration": "type"}, {}),
    "java": Grammar(_java, {"class_declaration": "class", "interface_declaration": "interface",
                            "enum_declaration": "enum", "record_declaration": "record",
                            "method_declaration": "method", "constructor_declaration": "constructor"}, {}),
    "javascript": Grammar(_javascript, JS_DECLARATIONS, JS_WRAPPERS),
    "typescript": Grammar(_typescript, TS_DECLARATIONS, JS_WRAPPERS),
    "tsx": Grammar(_tsx, TS_DECLARATIONS, JS_WRAPPERS),
}
LANGUAGE_OF = {".py": "python", ".go": "go", ".java": "java", ".js": "javascript", ".mjs": "javascript",
               ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx"}
FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
WORD = re.compile(r"\w+")
HAS_WORD = re.compile(r"[A-Za-z0-9]")


@cache
def parser(language: str) -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(GRAMMARS[language].language()))


@dataclass(frozen=True)
class Part:
    start: int  # byte offsets into the source
    end: int
    labels: tuple[str, ...]  # declaration path: ("class Parser", "def parse")
    symbol: str
    kind: str


class Declarations:
    """A parsed file's parts: its declarations, members of its classes, and the lines between them."""

    def __init__(self, grammar: Grammar, source: bytes) -> None:
        self.grammar, self.source = grammar, source

    def text(self, node) -> str:
        return self.source[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    def declaration(self, node):
        """(the node whose span counts, the declaration inside it) or None when it declares nothing."""
        inner = node
        while inner.type in self.grammar.wrappers:
            inner = inner.child_by_field_name(self.grammar.wrappers[inner.type])
            if inner is None:
                return None
        if inner.type not in self.grammar.declarations:
            return None
        if inner.type == "lexical_declaration" and not self._function_value(inner):
            return None  # `const x = 1`: module lines, not a declaration
        return node, inner

    def _function_value(self, node):
        for child in node.named_children:
            if child.type == "variable_declarator":
                value = child.child_by_field_name("value")
                if value is not None and value.type in FUNCTION_VALUES:
                    return child
        return None

    def name(self, node) -> str:
        if node.type == "lexical_declaration":
            node = self._function_value(node)
        elif node.type == "type_declaration":
            node = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), node)
        named = node.child_by_field_name("name")
        name = self.text(named) if named is not None else "?"
        receiver = node.child_by_field_name("receiver")  # Go: func (s *Server) Run -> Server.Run
        if receiver is not None and (words := WORD.findall(self.text(receiver))):
            name = f"{words[-1]}.{name}"
        return name

    def members(self, node):
        for field in self.grammar.bodies:
            body = node.child_by_field_name(field)
            if body is not None and any(self.declaration(c) for c in body.named_children):
                return body
        return None

    def parts(self, node, start: int, end: int, labels: tuple[str, ...] = (), owner: str = "",
              kind: str = "module") -> list[Part]:
        """The parts of [start, end) of `node`'s children: each declaration (its members in turn), and the
        stretches between them as the enclosing declaration's (or the module's)."""
        out, cursor = [], start
        for child in node.named_children:
            found = self.declaration(child)
            if found is None:
                continue
            outer, inner = found
            if outer.start_byte > cursor:
                out.append(Part(cursor, outer.start_byte, labels, owner, kind))
            name = self.name(inner)
            symbol = f"{owner}.{name}" if owner else name
            what = self.grammar.declarations[inner.type]
            path = (*labels, f"{what} {name}")
            body = self.members(inner)
            if body is not None:
                out += self.parts(body, outer.start_byte, outer.end_byte, path, symbol, what)
            else:
                out.append(Part(outer.start_byte, outer.end_byte, path, symbol, what))
            cursor = outer.end_byte
        if end > cursor:
            out.append(Part(cursor, end, labels, owner, kind))
        return out


class CodeReader:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        text = source.text()
        data = text.encode("utf-8")
        language = LANGUAGE_OF[source.suffix]
        tree = parser(language).parse(data)
        found = Declarations(GRAMMARS[language], data)
        chars = CharOffsets(text, data)
        sections = []
        for part in found.parts(tree.root_node, 0, len(data)):
            start, end = chars.of(part.start), chars.of(part.end)
            if not HAS_WORD.search(text, start, end):
                continue  # blank lines, a lone closing brace
            fields = {"symbol": part.symbol, "symbol_kind": part.kind} if part.symbol else {"symbol_kind": part.kind}
            sections.append(ingest_pb2.DocumentSection(start=start, end=end, heading=" > ".join(part.labels),
                                                       metadata=fields))
        fields = {**source.fields(), "language": language}
        yield ingest_pb2.Document(id=source.doc_id, title=source.rel, text=text, sections=sections,
                                  metadata=fields)


class CharOffsets:
    """Byte offsets of the UTF-8 source as code-point offsets of its text."""

    def __init__(self, text: str, data: bytes) -> None:
        self.ascii = len(text) == len(data)
        self.data = data

    def of(self, byte: int) -> int:
        return byte if self.ascii else len(self.data[:byte].decode("utf-8", errors="replace"))
