"""The seeded interleaving of an unlocked buffer's writes and reads (seed 000), shared by the replay's buffer and
the engine's, so one seed means the same schedule wherever the fault is planted."""

from __future__ import annotations

import random


def draw_schedule(request_ids: list[str], seed: int) -> list[tuple[str, str]]:
    """A random interleaving of ("write", id) and ("read", id) with each write before its own read."""
    rng = random.Random(seed)
    pending = {rid: ["write", "read"] for rid in request_ids}
    order: list[tuple[str, str]] = []
    while pending:
        rid = rng.choice(sorted(pending))
        order.append((pending[rid].pop(0), rid))
        if not pending[rid]:
            del pending[rid]
    return order
