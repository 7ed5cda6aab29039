"""`temporal-ids-flat` inside vLLM (`QDEBUG_VLLM_INJECT`, see vllm_faults.py): every video token's temporal MRoPE id set to
its video's first, as a pipeline that takes a video for one image would place it (every frame at one time).

The model's own `get_mrope_input_positions` is left as it is; what changes is the positions the runner keeps for the
request (`req_state.mrope_positions`, computed once when the request arrives) and so every position the decoder receives.
Nothing here says which request was touched: qdebug reads the ids the decoder received."""

from __future__ import annotations

from typing import Any


def flatten_video_temporal_ids(positions: Any, features: Any) -> None:
    """In place: row 0 (temporal) of `positions` (3 × T) over each video feature's placeholder range set to its first id."""
    for feature in features or []:
        if getattr(feature, "modality", None) != "video":
            continue
        start = int(feature.mm_position.offset)
        end = start + int(feature.mm_position.length)
        if start < positions.shape[-1]:
            positions[0, start:end] = positions[0, start]


def plant_temporal_ids_flat(runner: Any) -> None:
    """Wrap the runner's `_init_mrope_positions` (vLLM 0.32's V1 runner: one call per new request) to flatten the ids it keeps."""
    init = runner._init_mrope_positions

    def init_flat(req_state: Any, *args: Any, **kwargs: Any) -> Any:
        result = init(req_state, *args, **kwargs)
        if getattr(req_state, "mrope_positions", None) is not None:
            flatten_video_temporal_ids(req_state.mrope_positions, getattr(req_state, "mm_features", None))
        return result

    runner._init_mrope_positions = init_flat
