"""Source code (tree-sitter and its packaged grammars): a file is one document titled by its path, cut
into sections at its functions, methods and classes, as CodeRAG chunks code. Each section's chunks carry
`symbol` (the declaration's name, `Class.method` for a member) and `symbol_kind` as fields, and the
declaration path ("class Parser > def parse") as their heading, which both legs index with the text; a
class's own lines (its header, its fields) are a section of their own, the module's lines between
declarations (imports, constants) one each. A collection declaring `fields: {symbol: 1.5, path: 0.5}`
weighs names and paths as CodeRAG does (docs/client.md "Indexing folders").

What each language yields (kinds as the language spells them):
- Python: def, class (decorators with their declaration). Go: func (`func (s *Server) Run` is `Server.Run`), type.
  Java: class, interface, enum, record, method, constructor. JavaScript/TypeScript: function (a `const` bound to
  a function too), class, method; TypeScript also interface, type, enum (an `export` with its declaration).
- Bash: function (`deploy() {` and `function cleanup {`).
- Rust: fn (a trait's signatures too), struct, enum, union, trait, impl, mod, macro, type; an impl's methods are
  its type's (`impl Display for Parser { fn fmt }` is `Parser.fmt`), a mod's items its own (`tests.helper`).
- C: function (the name at the end of its declarator: `static int *make_buffer(size_t n)` is `make_buffer`),
  struct, union, enum, typedef; declarations under `#ifdef` (include guards) and `extern "C" {` as at the top.
- C++: as C, and class; methods defined in their class are its members, one defined outside it is named as one
  (`int Shape::area()` is `Shape.area`, the same symbol either way); templates with their declaration;
  namespaces name nothing, their declarations read as the file's (as Java's packages, C#'s namespaces).
- C#: class, struct, interface, enum, record, method, constructor, property; namespaces name nothing.
- Ruby: def (`def self.build` in `class Box` is `Box.build`, `def Box.make` too), class, module (members
  `Shapes.Box.area`; `class Shapes::Circle` is `Shapes.Circle`); `class << self` methods are the class's."""

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
    wrappers: dict[str, str | None]              # node type -> field holding the declaration (decorators, export);
                                                 # None: its last child (a C++ template)
    bodies: frozenset[str] = frozenset({"body"})  # a container's field holding its members
    names: tuple[str, ...] = ("name",)           # fields followed from a declaration down to its name
    through: frozenset[str] = frozenset()        # nodes on that way with none of them: their one child, (*f) &f
    receiver: str = "receiver"                   # a method's field naming its type (Go's receiver)
    transparent: frozenset[str] = frozenset()    # nodes whose children stand in their place (#ifdef, namespace)


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


def _bash():
    import tree_sitter_bash
    return tree_sitter_bash.language()


def _rust():
    import tree_sitter_rust
    return tree_sitter_rust.language()


def _c():
    import tree_sitter_c
    return tree_sitter_c.language()


def _cpp():
    import tree_sitter_cpp
    return tree_sitter_cpp.language()


def _c_sharp():
    import tree_sitter_c_sharp
    return tree_sitter_c_sharp.language()


def _ruby():
    import tree_sitter_ruby
    return tree_sitter_ruby.language()


JS_DECLARATIONS = {"function_declaration": "function", "generator_function_declaration": "function",
                   "class_declaration": "class", "method_definition": "method", "lexical_declaration": "function"}
TS_DECLARATIONS = {**JS_DECLARATIONS, "abstract_class_declaration": "class", "interface_declaration": "interface",
                   "type_alias_declaration": "type", "enum_declaration": "enum"}
JS_WRAPPERS = {"export_statement": "declaration"}
C_DECLARATIONS = {"function_definition": "function", "struct_specifier": "struct", "union_specifier": "union",
                  "enum_specifier": "enum", "type_definition": "typedef"}
C_NAMES = ("name", "declarator")  # function_definition > pointer_declarator > function_declarator > identifier
C_THROUGH = frozenset({"parenthesized_declarator", "reference_declarator"})  # int (*f)(int); int &Foo::get()
C_TRANSPARENT = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
                           "linkage_specification", "declaration_list"})  # include guards, extern "C" { ... }

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
    "bash": Grammar(_bash, {"function_definition": "function"}, {}),
    "rust": Grammar(_rust, {"function_item": "fn", "function_signature_item": "fn", "struct_item": "struct",
                            "enum_item": "enum", "union_item": "union", "trait_item": "trait", "impl_item": "impl",
                            "mod_item": "mod", "macro_definition": "macro", "type_item": "type"}, {},
                    names=("name", "type")),  # impl Display for Vec<T>: its type's name, Vec
    "c": Grammar(_c, C_DECLARATIONS, {}, names=C_NAMES, through=C_THROUGH, transparent=C_TRANSPARENT),
    "cpp": Grammar(_cpp, {**C_DECLARATIONS, "class_specifier": "class"}, {"template_declaration": None},
                   names=C_NAMES, through=C_THROUGH, transparent=C_TRANSPARENT | {"namespace_definition"}),
    "c_sharp": Grammar(_c_sharp, {"class_declaration": "class", "struct_declaration": "struct",
                                  "interface_declaration": "interface", "enum_declaration": "enum",
                                  "record_declaration": "record", "method_declaration": "method",
                                  "constructor_declaration": "constructor", "property_declaration": "property"}, {},
                       transparent=frozenset({"namespace_declaration", "declaration_list", "preproc_if",
                                              "preproc_elif", "preproc_else"})),
    "ruby": Grammar(_ruby, {"method": "def", "singleton_method": "def", "class": "class", "module": "module"}, {},
                    receiver="object", transparent=frozenset({"singleton_class", "body_statement"})),
}
LANGUAGE_OF = {".py": "python", ".go": "go", ".java": "java", ".js": "javascript", ".mjs": "javascript",
               ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx",
               ".sh": "bash", ".bash": "bash", ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
               ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".cs": "c_sharp", ".rb": "ruby"}
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
            field = self.grammar.wrappers[inner.type]
            inner = inner.child_by_field_name(field) if field else (inner.named_children or [None])[-1]
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
        name = self.named(node) or "?"
        # Go: func (s *Server) Run -> Server.Run; Ruby: def Box.make -> Box.make (`def self.x`: its class's)
        receiver = node.child_by_field_name(self.grammar.receiver)
        if receiver is not None and (words := WORD.findall(self.text(receiver))) and words[-1] != "self":
            name = f"{words[-1]}.{name}"
        return name

    def named(self, node, top: bool = True) -> str:
        """The name at the end of the grammar's name fields ("" when the declaration has none); a `scope`
        qualifies it as a member is named (C++ `Shape::area`, Ruby `Shapes::Circle`: Shape.area, Shapes.Circle)."""
        for field in self.grammar.names:
            child = node.child_by_field_name(field)
            if child is not None:
                name, scope = self.named(child, False), node.child_by_field_name("scope")
                return f"{self.named(scope, False)}.{name}" if scope is not None else name
        if node.type in self.grammar.through and node.named_child_count == 1:
            return self.named(node.named_children[0], False)
        return "" if top else self.text(node).replace("::", ".")

    def children(self, node):
        """`node`'s named children, a transparent one's (#ifdef, namespace) in its place."""
        for child in node.named_children:
            if child.type in self.grammar.transparent:
                yield from self.children(child)
            else:
                yield child

    def members(self, node):
        for field in self.grammar.bodies:
            body = node.child_by_field_name(field)
            if body is not None and any(self.declaration(c) for c in self.children(body)):
                return body
        return None

    def parts(self, node, start: int, end: int, labels: tuple[str, ...] = (), owner: str = "",
              kind: str = "module") -> list[Part]:
        """The parts of [start, end) of `node`'s children: each declaration (its members in turn), and the
        stretches between them as the enclosing declaration's (or the module's)."""
        out, cursor = [], start
        for child in self.children(node):
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
