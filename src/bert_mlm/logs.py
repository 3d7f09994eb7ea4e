"""How the project logs: plain one-line records in files, Rich's display in a terminal.

``conf/logging.yml`` (Kedro reads it at start-up) writes plain lines; :func:`configure_logging`,
called from ``settings.py``, switches to Rich when stdout is a terminal, and routes Optuna's
records through the same handler instead of Optuna's own. ``BERT_MLM_LOGS=plain|rich`` forces
one or the other; a ``KEDRO_LOGGING_CONFIG`` set by the user is left alone.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from pathlib import Path

LOGS_ENV = "BERT_MLM_LOGS"

# Kedro's own INFO lines, except each dataset load and save (8 lines a node; kedro-viz shows a
# node's inputs and outputs): "Running node" and "Completed N out of M tasks" stay.
LOGGERS = {"kedro": {"level": "INFO"}, "kedro.io.data_catalog": {"level": "WARNING"}, "bert_mlm": {"level": "INFO"},
           "optuna": {"level": "INFO"}}

RICH = {"version": 1, "disable_existing_loggers": False, "loggers": LOGGERS, "root": {"handlers": ["rich"]},
        "handlers": {"rich": {"class": "kedro.logging.RichHandler", "rich_tracebacks": True}}}
PLAIN = {"version": 1, "disable_existing_loggers": False, "loggers": LOGGERS, "root": {"handlers": ["console"]},
         "formatters": {"plain": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s",
                                  "datefmt": "%Y-%m-%d %H:%M:%S"}},
         "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stdout"}}}


def wanted_style() -> str | None:
    """``plain`` or ``rich``; ``None`` where the user's own Kedro logging file rules."""
    forced = os.environ.get(LOGS_ENV, "").strip().lower()
    if forced in ("plain", "rich"):
        return forced
    if os.environ.get("KEDRO_LOGGING_CONFIG"):
        return None
    return "rich" if sys.stdout.isatty() else "plain"


def one_line_records(record: logging.LogRecord) -> bool:
    """A log filter that keeps a plain log one line per record: Kedro's "Running node" lines name
    the node (its inputs and outputs run to 300+ characters; kedro-viz shows them), and line breaks
    inside a message become " | "."""
    message = record.getMessage()
    if record.name == "kedro.pipeline.node" and message.startswith("Running node: "):
        message = "Running node: " + message.removeprefix("Running node: ").split(":", 1)[0]
    if "\n" in message:
        message = " | ".join(part.strip() for part in message.splitlines() if part.strip())
    record.msg, record.args = message, None
    return True


# Kedro's lines that repeat what another line says: "Completed node: X" (followed by "Completed N out
# of M tasks"), the run's duration (the project's run summary states it), and the suggestion to try
# --async (a hint about Kedro, not about this run).
KEDRO_REPEATS = ("Completed node: ", "Pipeline execution completed successfully",
                 "Using synchronous mode for loading and saving data")


def without_kedro_repeats(record: logging.LogRecord) -> bool:
    return not (record.name.startswith("kedro.runner") and str(record.msg).startswith(KEDRO_REPEATS))


class RedactedRecords(logging.Filter):
    """No secret in a log: every record's message (and its traceback text) through
    :func:`bert_mlm.core.common.redaction.redact`, so a URL with a password or a signed query string that
    reaches a message (ours, Kedro's, a library's error text) is masked in every handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        from bert_mlm.core.common.redaction import redact

        message = record.getMessage()
        shown = redact(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
WARNING_CHARS = 200


def _warning_as_one_record(message, category, filename, lineno, file=None, line=None) -> None:
    """A library's warning as one log record: colour codes removed, long texts shortened (the
    file and line say where to read the whole)."""
    text = _ANSI.sub("", str(message))
    if len(text) > WARNING_CHARS:
        text = text[: WARNING_CHARS - 1] + "…"
    logging.getLogger("py.warnings").warning("%s: %s (%s:%s)", category.__name__, text, Path(filename).name, lineno)


def configure_logging() -> None:
    import optuna
    from kedro.framework.project import LOGGING

    # Optuna's trial lines through the project's handler and format, not Optuna's own.
    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
    style = wanted_style()
    if style is not None:
        LOGGING.configure(RICH if style == "rich" else PLAIN)
    for handler in logging.getLogger().handlers:  # the user's own logging configuration too: no secret in it
        if not any(isinstance(f, RedactedRecords) for f in handler.filters):
            handler.addFilter(RedactedRecords())
        if style is not None:
            handler.addFilter(without_kedro_repeats)
        if style == "plain":
            handler.addFilter(one_line_records)
    if style == "plain":
        warnings.showwarning = _warning_as_one_record  # a warning is one record too, not two raw lines
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # its bars (saving, loading weights) are not records
