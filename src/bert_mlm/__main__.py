"""`bert-mlm` / `python -m bert_mlm`: the project's commands.

    bert-mlm [run] [OPTIONS]          run the pipelines, as `kedro run` does (`run` may be left out)
    bert-mlm fill-mask "... [MASK] ..."  fill masks with the trained model
    bert-mlm params [SECTION]         every parameter: type, default, range, help
"""

import importlib
import sys
from pathlib import Path
from typing import Any

import click

# name -> (module, attribute, one-line help); a command's module is imported only when it runs:
# importing kedro.framework sets up (and announces) Kedro's logging, which must not end up in
# fill-mask's or params' output, and `params` imports no torch.
COMMANDS = {
    "run": ("bert_mlm.cli", "run", "Run the pipelines, as `kedro run` does (the default: `run` may be left out)."),
    "fill-mask": ("bert_mlm.fill_mask", "fill_mask_command", "Print the top-k fills of [MASK] with a trained model."),
    "params": ("bert_mlm.config.describe", "params_command",
               "List every parameter: type, default, range and a one-line help (--json-schema for editors)."),
}


class Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return getattr(importlib.import_module(COMMANDS[name][0]), COMMANDS[name][1]) if name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, _, short) in COMMANDS.items()])


@click.group("bert-mlm", cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
def bert_mlm() -> None:
    """Pretrain (or continue pretraining) a BERT masked language model on your corpus: a Kedro
    project. `bert-mlm run --help` lists the run's options; docs: README.md."""


def main(*args, **kwargs) -> Any:
    argv = list(args[0]) if args and isinstance(args[0], (list, tuple)) else sys.argv[1:]
    interactive = hasattr(sys, "ps1")
    if argv[:1] and (argv[0] in (*COMMANDS, "-h", "--help") or not argv[0].startswith("-")) and argv[0] != "run":
        return bert_mlm.main(argv, prog_name="bert-mlm", standalone_mode=not interactive)
    from kedro.framework.cli.utils import find_run_command
    from kedro.framework.project import configure_project

    package_name = Path(__file__).parent.name
    configure_project(package_name)
    return find_run_command(package_name).main(argv[1:] if argv[:1] == ["run"] else argv, prog_name="bert-mlm run",
                                               **{**kwargs, "standalone_mode": not interactive})


if __name__ == "__main__":
    main()
