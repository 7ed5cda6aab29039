"""Statements of the documentation held to the code they describe: the exit-code table (docs/commands/index.md and
the README's sentence) against the QDebugError family and the CLI's interrupt codes, the demo model's page against
its shipped config.json and size."""

from __future__ import annotations

import inspect
import json
import re

import qdebug.errors as errors
from tests.docs_text import DOCS, ROOT

CHECKPOINT = ROOT / "qdebug" / "demo" / "checkpoint"


def _table_codes() -> dict[int, str]:
    """code → meaning, from the exit-code table of docs/commands/index.md ("130 / 143" gives both)."""
    text = (DOCS / "commands" / "index.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    codes = {}
    for first, second, meaning in re.findall(r"^\|\s*(\d+)(?:\s*/\s*(\d+))?\s*\|\s*(.+?)\s*\|\s*$", text, re.M):
        codes[int(first)] = meaning
        if second:
            codes[int(second)] = meaning
    return codes


def test_the_exit_code_table_is_the_error_familys_codes():
    """Every code an error class exits with is in the table, and every table code but 0 and the interrupts is one."""
    family = {cls.exit_code for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, errors.QDebugError)}
    assert errors.UnreachableError.exit_code == 6 and errors.IncompatibleTracesError.exit_code == 5
    table = _table_codes()
    assert family <= set(table), f"codes missing from the table: {family - set(table)}"
    assert set(table) - family == {0, 130, 143}, set(table) - family
    assert "Ctrl-C" in table[130] and "SIGTERM" in table[143]
    cli = (ROOT / "qdebug" / "cli.py").read_text(encoding="utf-8")
    assert "143 if terminated.is_set() else 130" in cli  # the interrupt codes the table names are the CLI's


def test_the_readme_lists_the_same_exit_codes():
    """The README's one-sentence summary names each code of the table, in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sentence = " ".join(readme.split("Exit codes are", 1)[1].split("[commands]", 1)[0].split())
    named = [int(n) for n in re.findall(r"\b(\d+)(?=[ /])", sentence)]
    assert named == sorted(_table_codes()), named


def test_the_demo_model_page_describes_the_shipped_checkpoint():
    """Layers, width, heads, vision blocks, patch, merge and size on docs/demo-model.md are the checkpoint's."""
    page = " ".join((DOCS / "demo-model.md").read_text(encoding="utf-8").split())
    config = json.loads((CHECKPOINT / "config.json").read_text(encoding="utf-8"))
    text, vision = config.get("text_config", config), config["vision_config"]
    said = re.search(r"\(`(\w+)`, (\d+) decoder layers of width (\d+) with (\d+) query / (\d+) key-value heads, "
                     r"a (\d+)-block vision tower, patch (\d+), merge (\d+);.*?about ([\d.]+) MB\)", page)
    assert said, "the demo model page no longer describes the checkpoint in the form this test reads"
    arch, layers, width, heads, kv, blocks, patch, merge, mb = said.groups()
    assert arch in config["architectures"]
    assert [int(layers), int(width), int(heads), int(kv)] == [text["num_hidden_layers"], text["hidden_size"],
                                                              text["num_attention_heads"], text["num_key_value_heads"]]
    assert [int(blocks), int(patch), int(merge)] == [vision["depth"], vision["patch_size"], vision["spatial_merge_size"]]
    size = sum(path.stat().st_size for path in CHECKPOINT.iterdir() if path.is_file())
    assert round(size / 1e6, 1) == float(mb), size
