"""ModelChoice: which model a command or the TUI loads (checkpoint, device, dtype, attention kernel)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .load import LoadedModel


@dataclass(kw_only=True)
class ModelChoice:
    """Which model to load: a checkpoint (demo | local dir | hub id in the local cache), device, dtype, kernel.

    Command args dataclasses inherit it, so the four fields are spelled one way everywhere; `attn_kernel`
    is what `--attn` sets (transformers' `attn_implementation` is derived from it at load time).
    """

    model: str | None = "demo"
    device: str = "auto"
    dtype: str = "auto"
    attn_kernel: str = "eager"

    @property
    def spec(self) -> str:
        """`model`, for a command that needs one (ModelLoadError, one line, when none was given)."""
        if self.model is None:
            from qdebug.errors import ModelLoadError

            raise ModelLoadError("no --model was given; expected `demo`, a checkpoint directory or a cached hub id")
        return self.model

    def load(self, **options: Any) -> LoadedModel:
        """Load this model offline (`options` go to `qdebug.model.load.load_model`, e.g. `device_map`)."""
        from .load import load_model

        return load_model(self.spec, self.device, self.dtype, self.attn_kernel, **options)
