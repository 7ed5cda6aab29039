"""constraints.txt (the exact versions CI installs) agrees with pyproject.toml's ranges: every dependency of qdebug and
of its test extra is pinned there, at a version its range allows, so CI runs a set a user's install could resolve."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_dependency_is_pinned_within_its_range():
    pins = _pins()
    outside = {}
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is a dependency but constraints.txt does not pin it"
        if not req.specifier.contains(pins[name], prereleases=True):
            outside[req.name] = (pins[name], str(req.specifier))
    assert not outside, f"pinned outside pyproject's range: {outside}"


def test_no_dependency_is_pinned_exactly_in_pyproject():
    pinned = [str(r) for r in _requirements() if any(s.operator == "==" for s in r.specifier)]
    assert not pinned, f"qdebug installs beside a user's own libraries: give ranges, not pins ({pinned})"
