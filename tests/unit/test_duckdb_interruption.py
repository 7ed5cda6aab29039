"""A stop signal that DuckDB turns into its own error is still a stop (exit 130/143), never "cannot be read"."""

from __future__ import annotations

import signal

import pyarrow as pa
import pytest

from qdebug.replay.log_sql import connect, interruptible
from qdebug.signals import Terminated, interrupt_exit_code, terminate_as_interrupt


def test_sigterm_while_duckdb_reads_a_registered_table_is_terminated_not_its_error():
    """DuckDB calls back into Python for a registered table's schema; SIGTERM there came back as InvalidInputException
    ("reading the schema of the object registered as 'twice' failed: Terminated: "), exit 1 instead of 143."""
    con = connect()

    class Schema:
        """An Arrow-like object whose schema read receives the signal, as a real table's did under the CI run."""

        sent = False

        def __arrow_c_stream__(self, requested_schema=None):
            if not Schema.sent:  # once: the stream is read again for the scan
                Schema.sent = True
                signal.raise_signal(signal.SIGTERM)
            return pa.table({"h": [1]}).__arrow_c_stream__(requested_schema)

    with terminate_as_interrupt(), pytest.raises(Terminated) as caught:
        with interruptible():
            con.register("twice", Schema())
            con.execute("SELECT * FROM twice").fetchall()
    con.close()
    assert interrupt_exit_code(caught.value) == 143


def test_an_ordinary_duckdb_error_is_not_taken_for_a_stop():
    con = connect()
    import duckdb

    with pytest.raises(duckdb.Error):
        with interruptible():
            con.execute("SELECT * FROM no_such_table")
