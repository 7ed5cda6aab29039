"""Text labels placed in an axes where they cross nothing: no other label, none of the shapes drawn there, no edge."""

from __future__ import annotations

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels (y up)
REACH = 320.0  # how far (pixels, vertical counted 1.5×) a label may sit from its point


def _apart(a: Box, b: Box) -> bool:
    return a[2] <= b[0] or a[0] >= b[2] or a[3] <= b[1] or a[1] >= b[3]


class LabelPlacer:
    """Places each label near its point, trying positions above, below, right and left; a label that fits nowhere is
    dropped and counted. Call `block` for every shape first: placement is in pixels, so the axes' limits and the
    figure's size and dpi must be final."""

    def __init__(self, ax, fontsize: float = 6.5):
        from matplotlib.font_manager import FontProperties

        self.ax, self.fontsize = ax, fontsize
        self._font = FontProperties(size=fontsize)
        self._renderer = ax.figure.canvas.get_renderer()
        self.obstacles: list[Box] = []
        self.boxes: list[Box] = []  # the labels placed, in pixels
        self.placed: list[str] = []
        self.dropped = 0

    def _px(self, x: float, y: float) -> tuple[float, float]:
        px, py = self.ax.transData.transform((x, y))
        return float(px), float(py)

    def block(self, x0: float, y0: float, x1: float, y1: float, pad: float = 1.0) -> None:
        """A shape in data coordinates that no label may cross."""
        (a, b), (c, d) = self._px(x0, y0), self._px(x1, y1)
        self.obstacles.append((min(a, c) - pad, min(b, d) - pad, max(a, c) + pad, max(b, d) + pad))

    def block_point(self, x: float, y: float, radius: float = 4.0) -> None:
        """A marker at (x, y), `radius` pixels around."""
        px, py = self._px(x, y)
        self.obstacles.append((px - radius, py - radius, px + radius, py + radius))

    def _candidates(self, w: float, h: float) -> list[tuple[float, float]]:
        """Offsets (dx, dy) of a label's lower-left corner from its point, nearest first: beside it, then further out."""
        out = []
        for shift in (0, 40, 90, 150, 220):
            for dx in (3 + shift, -3 - w - shift):
                for j in range(-30, 31):
                    dy = 3 + j * h if j >= 0 else -3 - (-j) * h
                    out.append((dx, dy))
        def distance(o):
            return abs(o[0] + (w / 2 if o[0] > 0 else -w / 2)) + 1.5 * abs(o[1])

        # beyond REACH a leader line crosses too much of the picture to be followed: such a label is left out
        return sorted((o for o in out if distance(o) <= REACH + w / 2), key=distance)

    def add(self, x: float, y: float, text: str, colour: str = "black") -> bool:
        """Label the point (x, y) with `text`, a thin leader line when it sits away from it; False when no free place
        was found (then it is left out, and counted)."""
        w, h, _ = self._renderer.get_text_width_height_descent(text, self._font, ismath=False)
        w, h = w + 1, h + 1  # a pixel of air
        px, py = self._px(x, y)
        frame = self.ax.bbox
        for dx, dy in self._candidates(w, h):
            box = (px + dx, py + dy, px + dx + w, py + dy + h)
            inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
            if inside and all(_apart(box, b) for b in self.obstacles + self.boxes):
                self.boxes.append(box)
                near = abs(dx) <= w + 4 and -h - 4 <= dy <= 4
                leader = None if near else {"arrowstyle": "-", "lw": 0.5, "color": colour, "alpha": 0.6, "shrinkA": 0, "shrinkB": 0}
                self.ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset pixels", fontsize=self.fontsize,
                                 color=colour, va="bottom", ha="left", annotation_clip=False, arrowprops=leader)
                self.placed.append(text)
                return True
        self.dropped += 1
        return False
