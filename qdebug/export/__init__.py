"""ONNX export of a model split the way real exports are (vision encoder, language-model prefill), and running it.

Layering: imports qdebug.model and qdebug.trace only; analysis and commands use it, never the other way round.
"""
