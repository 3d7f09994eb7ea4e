"""The one error type a user can fix: a parameter, an input file, a storage URL. ``kedro run``
prints it as one line (``cli.py``); a ``ValueError``, so that callers that catch those keep working.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator


class UserError(ValueError):
    """Invalid parameters or inputs; the message names the parameter or the file."""


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and the exceptions behind it (its cause, else its context), each once."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def first_line(error: BaseException, limit: int = 200) -> str:
    """The first line of ``error``'s message, cut at ``limit`` characters (its type's name when the
    message is empty): what a one-line message quotes of an error from a library."""
    lines = str(error).strip().splitlines()
    return lines[0].strip()[:limit] if lines else type(error).__name__


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean 'x'? `` for the known name closest to ``name`` (a typo), else ``""``."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""
