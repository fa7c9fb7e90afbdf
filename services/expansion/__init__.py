"""Query expansion: lexical/semantic variants and a HyDE passage, cached in Redis."""
