"""Inside a serving engine: qdebug's vLLM plugin records a request's stages from vLLM's own worker.

Imports only vocabulary, model-free parts of `qdebug.trace` and the standard library at module level, so the
plugin loads in a vLLM environment that has torch, transformers and vLLM but none of qdebug's UI libraries.
"""
