"""Endpoint verdicts from answers alone: own answer, another request's answer, close to another's, no one's."""

from qdebug.analysis.endpoint import first_token_shift, judge


def test_judge():
    others = {"b": "a red circle in the top left", "c": "a blue square in the bottom right"}
    assert judge("a green triangle in the top right", "a green triangle in the top right", others) == ("ok", [])
    assert judge("a red circle in the top left", "a green triangle in the top right", others) == ("contaminated", ["b"])
    assert judge("a blue square in the bottom left", "a green triangle in the top right", others) == ("contaminated", ["c"])
    assert judge("a green triangle in the top left", "a green triangle in the top right", others) == ("diverged", [])
    # Two requests that answer alike alone: someone else's answer, but whose cannot be told.
    same = {"b": "a red circle in the top left", "d": "a red circle in the top left"}
    assert judge("a red circle in the top left", "a green square", same) == ("contaminated", ["b", "d"])
    # Equally close to two others: no donor is named.
    tie = {"b": "a red circle in the top left", "d": "a blue circle in the top left"}
    assert judge("a pink circle in the top left", "a green square in the bottom right", tie) == ("diverged", [])


def test_first_token_shift():
    ref = {"a": -0.1, "the": -2.5, "one": -4.0}
    assert first_token_shift(ref, dict(ref)) == (0.0, 1.0)
    kl, overlap = first_token_shift(ref, {"the": -0.1, "a": -2.5, "x": -4.0})
    assert kl > 1.0 and overlap == 2 / 3
    assert first_token_shift(None, ref) == (None, None)
