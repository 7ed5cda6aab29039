"""Which modules an import pulls in, measured in a fresh interpreter: the layering tests' one tool."""

import json
import subprocess
import sys

UI_LIBRARIES = ("rich", "textual", "matplotlib")

_CODE = """
import importlib, json, pkgutil, sys
modules, packages, roots, prefixes = json.loads(sys.argv[1])
for name in modules:
    importlib.import_module(name)
for name in packages:  # every module below the package, subpackages included
    for info in pkgutil.walk_packages(importlib.import_module(name).__path__, name + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in roots or m.startswith(tuple(prefixes)))))
"""


def forbidden_imports(modules=(), *, packages=(), roots=(), prefixes=()) -> list[str]:
    """The loaded modules whose top name is in `roots` or whose name starts with one of `prefixes`, after importing
    `modules` and every module under `packages` in a fresh interpreter (an import that fails fails the test)."""
    args = json.dumps([list(modules), list(packages), list(roots), list(prefixes)])
    out = subprocess.run([sys.executable, "-c", _CODE, args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.splitlines()[-1])
