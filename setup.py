"""The one native part of qdebug (the runtime-log recogniser's pass, qdebug/replay/formats/_logscan.c); the rest of the
package is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("qdebug.replay.formats._logscan", ["qdebug/replay/formats/_logscan.c"],
                             extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"])])
