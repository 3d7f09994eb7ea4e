"""The one error type a user can fix: a parameter, an input file, a storage URL.

``kedro run`` (through this project's ``cli.py``) prints a ``UserError`` as one line and exits
with status 2; any other exception is a bug and keeps its traceback. ``BERT_MLM_DEBUG=1`` shows
the traceback of user errors too. A ``ValueError`` subclass, so that callers that catch
``ValueError`` keep working.
"""

from __future__ import annotations


class UserError(ValueError):
    """Invalid parameters or inputs; the message names the parameter or the file."""


def first_line(error: BaseException, limit: int = 200) -> str:
    """The first line of ``error``'s message, cut at ``limit`` characters (its type's name when the
    message is empty): what a one-line message quotes of an error from a library."""
    lines = str(error).strip().splitlines()
    return lines[0].strip()[:limit] if lines else type(error).__name__
