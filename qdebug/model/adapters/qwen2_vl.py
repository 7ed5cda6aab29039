"""Qwen2-VL (`Qwen2VLForConditionalGeneration`)."""

from .base import Adapter

ADAPTER = Adapter(name="Qwen2VLForConditionalGeneration", model_types=("qwen2_vl",))
