"""errors.py turns any exception into the one line a user is shown."""

from qdebug.errors import InputError, cause, describe, first_line, text_lines


def test_one_line_forms_of_an_exception():
    exc = RuntimeError("\x1b[31mboom\x1b[0m  \n\n  second line\n")
    assert text_lines(exc) == ["boom", "second line"]
    assert cause(exc) == "boom" and first_line(exc) == "RuntimeError: boom"
    assert cause(ValueError()) == "ValueError" and first_line(ValueError("  ")) == "ValueError"
    assert describe(InputError("bad --json path")) == "bad --json path" and describe(KeyError("x")) == "KeyError: 'x'"
