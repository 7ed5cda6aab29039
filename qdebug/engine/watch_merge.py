"""The watch's checks at the merge of visual rows, on every request (not sampled): `counts` (once per item) and
`placement` (every step that computes an item's placeholder rows: a bit-exact copy of the item's own encoder rows
passes at once; other rows are compared projected, within a tolerance, and matched to their owners)."""

from __future__ import annotations

from qdebug.vocab import StageName, WatchCheck

from .vllm_model import model_configs
from .watch_checks import check_counts, check_placement, items_of, project
from .watch_log import WatchFinding
from .watch_registry import ItemAt, Need, Point, WatchEntry, register


@register
class CountsCheck(WatchEntry):
    """Placeholder tokens == encoder rows == the grid's count, per item."""

    check = WatchCheck.COUNTS
    point = Point.ITEM
    sampled = False
    needs = frozenset({Need.ITEMS, Need.ENCODER_CACHE})
    stage = StageName.PREPROCESS
    once_per_item = True

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        configs = model_configs(watcher.runner.model_config.hf_config)  # the thinker's, for Omni; placeholder ids read once
        self.merge = int(getattr(configs.vision, "spatial_merge_size", 2) or 2)
        self.tokens = {"image": configs.image_token_id, "video": configs.video_token_id, "audio": configs.audio_token_id}

    def findings(self, at: ItemAt) -> list[WatchFinding]:
        rows = (getattr(self.watcher.runner, "encoder_cache", None) or {}).get(at.item.identifier)
        if rows is None:
            return []
        why = check_counts(at.item, getattr(at.state, "prompt_token_ids", None), self.tokens.get(at.item.modality), int(rows.shape[0]), self.merge)
        if why is None:
            return []
        return [self.watcher.finding(self.check, at.rid, at.state, f"item {at.item.index} ({at.item.modality}): {why}", [], [])]


@register
class PlacementCheck(WatchEntry):
    """The rows at an item's placeholders are its own encoder rows (else whose they are)."""

    check = WatchCheck.PLACEMENT
    point = Point.ITEM
    sampled = False
    needs = frozenset({Need.ITEMS, Need.MERGED_ROWS, Need.ENCODER_CACHE})
    stage = StageName.SYNC

    def findings(self, at: ItemAt) -> list[WatchFinding]:
        import torch

        watcher, item, out, start, rows, enc = self.watcher, at.item, at.out, at.start, at.rows, at.enc
        if self._copied(at):
            return []
        own = watcher.projected(item.identifier)
        if own is None or max(enc) >= own.shape[0]:
            return []  # no source to compare with (counts says when the rows are too few)
        if rows[-1] - rows[0] == len(rows) - 1 and enc[-1] - enc[0] == len(enc) - 1:  # one run (as an image's is): views
            landed, mine = project(out[start + rows[0]:start + rows[-1] + 1], watcher.matrix), own[enc[0]:enc[-1] + 1]
        else:
            landed = project(out.index_select(0, torch.tensor(rows, device=out.device) + start), watcher.matrix)
            mine = own[torch.tensor(enc, device=own.device)]
        result = check_placement(at.rid, item, landed, mine, self._live_rows)
        if not result.wrong:
            return []
        share = ", ".join([*(f"{n} from {d}" for d, n in sorted(result.donors.items())),
                           *([f"{result.shifted} its own from other positions"] if result.shifted else []),
                           *([f"{result.unmatched} no live request's"] if result.unmatched else [])])
        first, last = item.embeds[enc[0]], item.embeds[enc[-1]]
        evidence = (f"item {item.index} ({item.modality}): {result.wrong} of {result.compared} rows at its placeholders "
                    f"(prompt positions {first}..{last}) are not its own encoder rows: {share}")
        return [watcher.finding(self.check, at.rid, at.state, evidence, sorted(result.donors), at.req_ids)]

    def _copied(self, at: ItemAt) -> bool:
        """Whether the item's rows landed as a bit-exact copy of its own encoder rows (one run of rows, as vLLM's merge
        copies them): one comparison, where the projected one is ~8 tensor operations; anything else is compared
        projected, as before, which also says whose rows they are."""
        import torch

        rows, enc, out = at.rows, at.enc, at.out
        raw = (getattr(self.watcher.runner, "encoder_cache", None) or {}).get(at.item.identifier)
        if raw is None or raw.dim() != 2 or raw.dtype != out.dtype or raw.shape[-1] != out.shape[-1] or enc[-1] >= raw.shape[0]:
            return False
        if rows[-1] - rows[0] != len(rows) - 1 or enc[-1] - enc[0] != len(enc) - 1:
            return False
        return torch.equal(out[at.start + rows[0]:at.start + rows[-1] + 1], raw[enc[0]:enc[-1] + 1])

    def _live_rows(self):
        """(owners, projected encoder rows) of every item a live request holds in the encoder cache."""
        watcher = self.watcher
        owners: dict[str, list[str]] = {}
        for rid in list(watcher.runner.requests):
            state = watcher.runner.requests.get(rid)
            for item in watcher.items.get(rid) or items_of(state) if state is not None else []:
                owners.setdefault(item.identifier, []).append(rid)
        for identifier, names in owners.items():
            rows = watcher.projected(identifier)
            if rows is not None:
                yield sorted(set(names)), rows
