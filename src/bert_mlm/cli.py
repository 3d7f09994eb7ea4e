"""``kedro run`` (and ``bert-mlm run``) as Kedro defines it, except that a user error
(:class:`~bert_mlm.errors.UserError`) ends with its one-line message and exit status 2 instead of a
traceback (``BERT_MLM_DEBUG=1`` shows it); bugs keep theirs.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click
from kedro.framework.cli.project import run as kedro_run

from bert_mlm.core.common.redaction import redact
from bert_mlm.errors import UserError, causes
from bert_mlm.kedro_checks import check_environment, check_selection, kedro_mistake

DEBUG_ENV = "BERT_MLM_DEBUG"


def user_errors_in_one_line(callback):
    @functools.wraps(callback)
    def wrapper(*args, **kwargs):
        try:
            check_selection(kwargs.get("pipelines") or [kwargs.get("pipeline")], kwargs)
            check_environment(kwargs.get("env"), kwargs.get("conf_source"), Path.cwd())
            return callback(*args, **kwargs)
        except Exception as error:
            cause = user_error_in(error) or kedro_mistake(error, kwargs.get("env"), kwargs.get("conf_source"),
                                                          Path.cwd())
            if cause is None or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0"):
                raise
            click.echo(f"Error: {redact(str(cause))}  ({DEBUG_ENV}=1 shows the traceback)", err=True)
            sys.exit(2)

    return wrapper


def user_error_in(error: BaseException) -> UserError | None:
    """The UserError behind ``error``: itself, or the cause a dataset wrapped in a DatasetError."""
    return next((cause for cause in causes(error) if isinstance(cause, UserError)), None)


@click.group(name="bert_mlm")
def cli() -> None:
    """bert-mlm's project commands."""


run = click.Command(name="run", params=kedro_run.params, callback=user_errors_in_one_line(kedro_run.callback),
                    help=kedro_run.help, short_help=kedro_run.short_help)
cli.add_command(run)
