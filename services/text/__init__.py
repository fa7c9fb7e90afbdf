"""How documents and queries are read: chunking, language, tags, links."""
