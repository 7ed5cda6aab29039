"""`qdebug estimate`: from config.json alone (meta device, no weights read), what a model and one traced request take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from qdebug.errors import InputError

if TYPE_CHECKING:
    from qdebug.trace.estimate import Estimate


@dataclass(kw_only=True)
class EstimateArgs:
    """Everything `qdebug estimate` was asked for."""

    model: str = "demo"
    image_tokens: int = 1024
    dtype: str = "auto"
    device: str = "auto"
    max_new_tokens: int = 16
    layers: str = "all"
    queries: str = "gen"
    keep_hidden: bool = False


def run_estimate(args: EstimateArgs) -> Estimate:
    """Check --queries, then estimate from the model's config."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.trace.estimate import estimate

    if args.queries not in ("gen", "all"):
        raise InputError(f"--queries {args.queries}: expected gen or all")
    quiet_transformers()
    return estimate(args.model, image_tokens=args.image_tokens, dtype=args.dtype, device=args.device, max_new_tokens=args.max_new_tokens,
                    layers=args.layers, queries=args.queries, keep_hidden=args.keep_hidden)
