"""The export manifest (`qdebug-onnx.json`): which graph input/output is which canonical stage.

`qdebug export onnx` writes it; for a user's own ONNX files the same file, written by hand, is the mapping
(see README "Exported models"). Only `format`, `version` and `graphs` are required.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from qdebug.errors import ExportFormatError
from qdebug.vocab import StageName

FORMAT = "qdebug-onnx-export"
VERSION = 1
MANIFEST_NAME = "qdebug-onnx.json"
GRAPHS = ("vision", "prefill")
# Input roles a graph may map (what qdebug feeds), output roles (which stage a graph output is).
INPUT_ROLES = {
    "vision": ("pixel_values", "vision_position_ids", "interp_indices", "interp_weights", "image_grid_thw"),
    "prefill": ("inputs_embeds", "position_ids", "attention_mask", "visual_pos_masks", "deepstack.K"),
}
OUTPUT_ROLES = {"vision": (StageName.ENCODE, "deepstack.K"), "prefill": (StageName.LOGITS, "layer.N")}
REQUIRED = {"vision": ("pixel_values", StageName.ENCODE), "prefill": ("inputs_embeds", StageName.LOGITS)}


@dataclass
class ManifestGraph:
    """One ONNX graph of an export: its file and role → graph name maps."""

    file: str
    inputs: dict[str, str]
    outputs: dict[str, str]

    def to_json(self) -> dict:
        """As written in the manifest."""
        return {"file": self.file, "inputs": self.inputs, "outputs": self.outputs}


@dataclass
class Manifest:
    """A parsed manifest: graphs by name, the model it claims to come from (if any), where it lives."""

    graphs: dict[str, ManifestGraph]
    model: dict | None = None
    root: Path = Path(".")
    path: Path = Path(MANIFEST_NAME)
    extra: dict = field(default_factory=dict)

    def file(self, graph: str) -> Path:
        """Absolute path of a graph's ONNX file."""
        return self.root / self.graphs[graph].file

    def to_json(self) -> dict:
        """The manifest document."""
        doc = {"format": FORMAT, "version": VERSION, **self.extra}
        if self.model is not None:
            doc["model"] = self.model
        doc["graphs"] = {name: g.to_json() for name, g in self.graphs.items()}
        return doc


def _role_ok(role: str, allowed: tuple[str, ...]) -> bool:
    for pattern in allowed:
        if pattern.endswith(".K") or pattern.endswith(".N"):
            if re.fullmatch(re.escape(pattern[:-1]) + r"\d+", role):
                return True
        elif role == pattern:
            return True
    return False


def _string_map(value, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ExportFormatError(f"{where}: expected an object mapping role names to graph tensor names")
    return dict(value)


def parse_manifest(data, path: Path) -> Manifest:
    """Validate a manifest document (ExportFormatError naming the file and key on anything unexpected)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportFormatError(f"{path}: not a qdebug ONNX manifest (expected \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ExportFormatError(f"{path}: manifest version {data.get('version')!r}; this qdebug reads {VERSION}")
    graphs = data.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise ExportFormatError(f"{path}: \"graphs\" must name at least one of {', '.join(GRAPHS)}")
    parsed: dict[str, ManifestGraph] = {}
    for name, g in graphs.items():
        where = f"{path}: graphs.{name}"
        if name not in GRAPHS:
            raise ExportFormatError(f"{where}: unknown graph; expected one of {', '.join(GRAPHS)}")
        if not isinstance(g, dict) or not isinstance(g.get("file"), str) or not g["file"]:
            raise ExportFormatError(f"{where}: expected an object with \"file\", \"inputs\" and \"outputs\"")
        graph = ManifestGraph(g["file"], _string_map(g.get("inputs", {}), f"{where}.inputs"), _string_map(g.get("outputs", {}), f"{where}.outputs"))
        for role in graph.inputs:
            if not _role_ok(role, INPUT_ROLES[name]):
                raise ExportFormatError(f"{where}.inputs: unknown role {role!r}; expected {', '.join(INPUT_ROLES[name])}")
        for role in graph.outputs:
            if not _role_ok(role, OUTPUT_ROLES[name]):
                raise ExportFormatError(f"{where}.outputs: unknown stage {role!r}; expected {', '.join(OUTPUT_ROLES[name])}")
        missing = [r for r in REQUIRED[name] if r not in graph.inputs and r not in graph.outputs]
        if missing:
            raise ExportFormatError(f"{where}: maps no {', '.join(missing)}; expected at least {' and '.join(REQUIRED[name])}")
        parsed[name] = graph
    model = data.get("model")
    if model is not None and not isinstance(model, dict):
        raise ExportFormatError(f"{path}: \"model\" must be an object")
    extra = {k: v for k, v in data.items() if k not in ("format", "version", "graphs", "model")}
    return Manifest(parsed, model, path.parent, path, extra)


def find_manifest(target: str | Path) -> Manifest:
    """Read the manifest of an export directory, or a mapping file given directly."""
    p = Path(target).expanduser()
    if not p.exists():
        raise ExportFormatError(f"--onnx {target}: no such file or directory; expected a directory written by `qdebug export onnx`")
    if p.is_file() and p.suffix == ".onnx":
        raise ExportFormatError(
            f"--onnx {target}: a bare ONNX file is not a qdebug export; expected its directory with {MANIFEST_NAME} "
            "(or write a mapping file naming which graph input/output is which stage, see README)"
        )
    path = p / MANIFEST_NAME if p.is_dir() else p
    if not path.is_file():
        onnx_files = sorted(x.name for x in p.glob("*.onnx")) if p.is_dir() else []
        found = f"ONNX files ({', '.join(onnx_files[:3])}) but " if onnx_files else ""
        raise ExportFormatError(
            f"--onnx {target}: {found}no {MANIFEST_NAME}; expected a qdebug export or a mapping file naming which "
            "graph input/output is which stage"
        )
    try:
        data = json.loads(path.read_text())
    except RecursionError:  # JSON nested thousands deep: no manifest is
        raise ExportFormatError(f"{path}: JSON nested too deeply to read; expected a flat JSON manifest") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportFormatError(f"{path}: unreadable ({type(exc).__name__}); expected a JSON manifest") from None
    return parse_manifest(data, path)
