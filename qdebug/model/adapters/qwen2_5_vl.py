"""Qwen2.5-VL (`Qwen2_5_VLForConditionalGeneration`): Qwen2-VL's layout, windowed vision attention."""

from .base import Adapter

ADAPTER = Adapter(name="Qwen2_5_VLForConditionalGeneration", model_types=("qwen2_5_vl",))
