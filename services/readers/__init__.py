"""Readers: the files of a folder as documents to index, one reader per kind of file.

Each reader turns one file into documents (`base.Reader`); `registry.READERS` maps a file's extension to
its reader, and `folder.walk` picks a folder's files (`--include/--exclude` globs), reads those it has a
reader for and counts the rest by extension. Every document carries `path`, `type`, `folder` and
`modified` in its metadata, and where its text begins in the file (source offsets), so that a hit cites
lines of the file itself. The libraries behind them (python-frontmatter, docutils, selectolax, tree-sitter
and its grammars, pypdf) come with the `readers` extra: a reader whose library is missing leaves its files
skipped, with the install line in the summary.
"""
