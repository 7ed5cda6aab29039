"""The one native part of qdebug: the runtime-log recogniser's pass (qdebug/replay/formats/_logscan.c). Everything else
is declared in pyproject.toml.

Optional: where no C compiler is found (a slim serving host), the install still succeeds and log recognition runs on
pyarrow's RE2 kernels, the same rows about four times slower (log_columns.native_built() says which is in use).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("qdebug.replay.formats._logscan", ["qdebug/replay/formats/_logscan.c"], optional=True,
                             extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wextra",
                                                 "-Werror=implicit-function-declaration"])])
