"""Source code: one section a declaration (tree-sitter), with its symbol and kind; nothing of the file lost."""

import re

import pytest

from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.code import LANGUAGE_OF, CodeReader
from hybridsearch.readers.registry import READERS, Kind

HAS_WORD = re.compile(r"[A-Za-z0-9]")

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
    "deploy.sh": '''#!/bin/bash
set -euo pipefail

deploy() {
  echo "deploying $1"
}

function cleanup {
  rm -rf /tmp/build
}

trap cleanup EXIT
deploy prod
''',
    "parser.rs": '''use std::fmt;

pub struct Parser {
    pos: usize,
}

pub trait Lexer {
    fn next(&mut self) -> Option<char>;
}

impl Parser {
    pub fn parse(&mut self, text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }
}

impl fmt::Display for Parser {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "at {}", self.pos)
    }
}

macro_rules! square { ($x:expr) => { $x * $x }; }
''',
    "buffer.c": '''#include <stdlib.h>

struct point {
    int x, y;
};

typedef struct {
    size_t len;
} buffer_t;

int area(int w, int h);

static int *make_buffer(size_t n)
{
    return malloc(n * sizeof(int));
}
''',
    "buffer.h": '''#ifndef BUFFER_H
#define BUFFER_H

int area(int w, int h);

static inline int twice(int x) { return 2 * x; }

#endif
''',
    "shape.cpp": '''#include "shape.hpp"

namespace geo {

class Shape {
public:
    double area() const { return w * h; }
    int count();
private:
    double w, h;
};

int Shape::count() { return 1; }

template <typename T>
T max_of(T a, T b) { return a > b ? a : b; }

}
''',
    "Greeter.cs": '''using System;

namespace Demo.Greeting
{
    public class Greeter
    {
        private readonly string prefix;

        public Greeter(string prefix) { this.prefix = prefix; }

        public string Prefix { get; set; }

        public string Hello(string name)
        {
            return prefix + name;
        }
    }
}
''',
    "box.rb": '''require "json"

module Shapes
  def self.all = []
end

class Box
  attr_reader :width

  def initialize(width)
    @width = width
  end

  def self.build
    new(1)
  end
end
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
    "deploy.sh": [("", "module", ""), ("function deploy", "function", "deploy"),
                  ("function cleanup", "function", "cleanup"), ("", "module", "")],
    # An impl's functions are its type's, a trait impl's too (`impl Display for Parser`: Parser.fmt).
    "parser.rs": [("", "module", ""), ("struct Parser", "struct", "Parser"), ("trait Lexer", "trait", "Lexer"),
                  ("trait Lexer > fn next", "fn", "Lexer.next"), ("impl Parser", "impl", "Parser"),
                  ("impl Parser > fn parse", "fn", "Parser.parse"), ("impl Parser", "impl", "Parser"),
                  ("impl Parser > fn fmt", "fn", "Parser.fmt"), ("macro square", "macro", "square")],
    # The name at the end of the declarator (through `*`); a prototype is the module's lines.
    "buffer.c": [("", "module", ""), ("struct point", "struct", "point"),
                 ("typedef buffer_t", "typedef", "buffer_t"), ("", "module", ""),
                 ("function make_buffer", "function", "make_buffer")],
    "buffer.h": [("", "module", ""), ("function twice", "function", "twice"), ("", "module", "")],  # in the guard
    # Shape::count defined outside its class is Shape.count, as area defined inside is Shape.area: one symbol
    # for a method wherever it is written. The namespace names nothing (as C#'s, as Java's packages).
    "shape.cpp": [("", "module", ""), ("class Shape", "class", "Shape"),
                  ("class Shape > function area", "function", "Shape.area"), ("class Shape", "class", "Shape"),
                  ("function Shape.count", "function", "Shape.count"), ("function max_of", "function", "max_of")],
    "Greeter.cs": [("", "module", ""), ("class Greeter", "class", "Greeter"),
                   ("class Greeter > constructor Greeter", "constructor", "Greeter.Greeter"),
                   ("class Greeter > property Prefix", "property", "Greeter.Prefix"),
                   ("class Greeter > method Hello", "method", "Greeter.Hello")],
    "box.rb": [("", "module", ""), ("module Shapes", "module", "Shapes"),
               ("module Shapes > def all", "def", "Shapes.all"), ("module Shapes", "module", "Shapes"),
               ("class Box", "class", "Box"), ("class Box > def initialize", "def", "Box.initialize"),
               ("class Box > def build", "def", "Box.build"), ("class Box", "class", "Box")],
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_declarations_become_sections_with_symbols(tmp_path, name):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_text(FILES[name])
    [doc] = CodeReader().read(SourceFile(tmp_path / "src" / name, tmp_path))
    assert doc.title == f"src/{name}" and doc.text == FILES[name]
    got = [(s.heading, s.metadata["symbol_kind"], s.metadata.get("symbol", "")) for s in doc.sections]
    assert got == EXPECTED[name]
    # In order, inside the text, and together they hold every word of the file (lone braces, `};` aside).
    assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:]))
    words = [w for w in doc.text.split() if HAS_WORD.search(w)]
    held = " ".join(doc.text[s.start:s.end] for s in doc.sections)
    assert [w for w in held.split() if HAS_WORD.search(w)] == words


def test_a_decorated_function_keeps_its_decorator_and_offsets_count_code_points(tmp_path):
    source = '# ünïcödé\n\n@cache\ndef f():\n    return "é"\n'
    (tmp_path / "u.py").write_text(source)
    [doc] = CodeReader().read(SourceFile(tmp_path / "u.py", tmp_path))
    f = next(s for s in doc.sections if s.metadata.get("symbol") == "f")
    assert doc.text[f.start:f.end] == '@cache\ndef f():\n    return "é"'


@pytest.mark.parametrize("suffix", sorted(LANGUAGE_OF))
def test_every_language_s_files_go_to_the_code_reader(suffix):
    assert READERS[suffix] is Kind.CODE


def test_templates_qualified_names_and_ruby_class_methods(tmp_path):
    """A template is read with its declaration; a name is qualified as written (`util::Stack<int>::name` outside
    its namespace is util.Stack.name); `class << self` methods and `def self.x` are the class's."""
    sources = {"stack.hpp": '''#pragma once
namespace util {
template <typename T>
class Stack {
public:
    T& top() { return items.back(); }
};
}
const std::string& util::Stack<int>::name() { return n; }
''', "cache.rb": '''class Cache
  class << self
    def instance = @instance ||= new
  end
end

class Shapes::Circle
  def area = 3
end

def Cache.clear = nil
'''}
    symbols = {}
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        [doc] = CodeReader().read(SourceFile(tmp_path / name, tmp_path))
        symbols[name] = [s.metadata.get("symbol", "") for s in doc.sections]
    assert symbols["stack.hpp"] == ["", "Stack", "Stack.top", "util.Stack.name"]
    assert symbols["cache.rb"] == ["Cache", "Cache.instance", "Cache", "Shapes.Circle", "Shapes.Circle.area",
                                   "Shapes.Circle", "Cache.clear"]
