"""qdebug: a debugger for Qwen multimodal inference."""

__version__ = "0.1.0"

STAGES_DOC = "preprocess, encode, sync, layer.N, logits, step.K"
