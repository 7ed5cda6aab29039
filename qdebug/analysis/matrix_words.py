"""What a replay report's matrix holds, in words: one source for its title, corner and legend, read by the CLI's table,
the TUI's panel and the endpoint report's `matrix_of` (an endpoint's matrix is of answers, a replay's of encoder rows,
a log's of buffer writes: the same grid, three different things)."""

from __future__ import annotations

from dataclasses import dataclass

ANSWERS = "answers: share of bursts in which request (row) answered what column answered alone"


@dataclass(frozen=True)
class MatrixWords:
    """The words around one report's matrix."""

    heading: str  # the panel's name
    title: str  # what the matrix is (the CLI table's title, the TUI panel's first line)
    corner: str  # rows \\ columns
    legend: str  # what a cell holds and what a red cell means
    answers: bool = False  # cells are shares of bursts (an endpoint replay), not cosines or log flags


ENDPOINT_WORDS = MatrixWords("answers", ANSWERS, "request \\ answer of",
                             "share of bursts; column j = what request j answered alone; red cell = another request's answer", True)
CAPTURE_WORDS = MatrixWords("contamination", "contamination: stream (row) vs isolated encoder rows (column), cosine", "stream \\ rows of",
                            "cosine; column j = request j's isolated encoder rows; red cell = donor")
LOG_WORDS = MatrixWords("contamination", "contamination from the log: whose buffer rows reached each request's stream (1 = yes)",
                        "stream \\ rows of", "1 = the log shows column j's buffer rows reaching row i's stream; red cell = donor")


def matrix_words(report) -> MatrixWords:
    """The words for `report`'s matrix: an endpoint replay's answers, a local replay's cosines, a log's flags."""
    if getattr(report, "endpoint", None):
        return ENDPOINT_WORDS
    return CAPTURE_WORDS if report.kind == "capture" else LOG_WORDS
