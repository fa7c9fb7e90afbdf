"""The cross-encoder reranker: a Triton model repository, its launcher, a client and score blending."""
