"""qdebug: a debugger for Qwen multimodal inference."""

__version__ = "0.1.0"
