"""Adapters by architecture; `adapter_for(config_dict)` picks one or says why none fits."""

from __future__ import annotations

from qdebug.errors import ModelLoadError

from .base import Adapter
from .qwen2_5_omni import ADAPTER as QWEN2_5_OMNI
from .qwen2_5_vl import ADAPTER as QWEN2_5_VL
from .qwen2_audio import ADAPTER as QWEN2_AUDIO
from .qwen2_vl import ADAPTER as QWEN2_VL
from .qwen3_5 import ADAPTER as QWEN3_5
from .qwen3_vl import ADAPTER as QWEN3_VL

ADAPTERS: tuple[Adapter, ...] = (QWEN2_VL, QWEN2_5_VL, QWEN3_VL, QWEN3_5, QWEN2_AUDIO, QWEN2_5_OMNI)
TEXT_ONLY_QWEN = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen")


def supported_model_types() -> list[str]:
    """Model types qdebug can trace."""
    return [t for a in ADAPTERS for t in a.model_types]


def adapter_of_type(model_type: str) -> Adapter | None:
    """The adapter whose architecture has this `model_type`, or None."""
    return next((adapter for adapter in ADAPTERS if model_type in adapter.model_types), None)


def adapter_for(config: dict, where: str) -> Adapter:
    """The adapter for a checkpoint's config.json contents, or ModelLoadError naming what was found."""
    model_type = str(config.get("model_type", ""))
    adapter = adapter_of_type(model_type)
    if adapter is not None:
        return adapter
    supported = ", ".join(supported_model_types())
    if model_type in TEXT_ONLY_QWEN:
        raise ModelLoadError(
            f"{where} is a text-only model (model_type {model_type!r}); expected a Qwen multimodal checkpoint ({supported})"
        )
    found = model_type or "no model_type"
    raise ModelLoadError(f"{where} is not a supported Qwen multimodal model ({found}); expected one of: {supported}")
