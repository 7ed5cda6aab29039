"""The log scan's native pass reads hostile logs safely: built with AddressSanitizer and UndefinedBehaviorSanitizer,
it sorts thousands of random, mutated and over-long lines, each chunk in a buffer of its exact size, and the
sanitizers report nothing (a read one byte past a line, or an overflow, fails the run)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "qdebug" / "replay" / "formats" / "_logscan.c"


def _runtime(name: str) -> str:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    assert os.path.isabs(found), f"gcc has no {name}: the sanitizer runtime is needed for this test"
    return found


def test_native_pass_under_address_sanitizer(tmp_path):
    built = tmp_path / "_logscan_asan.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-fno-omit-frame-pointer", "-std=c99", f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o",
                    str(built)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "LD_PRELOAD": f"{_runtime('libasan.so')}:{_runtime('libubsan.so')}",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    proc = subprocess.run([sys.executable, str(HERE / "native_scan_fuzz.py"), str(built), "7", "3000"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("ok "), proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-3000:]
