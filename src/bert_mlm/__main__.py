"""`bert-mlm` / `python -m bert_mlm`: runs the Kedro project (as `kedro run` does), or
`bert-mlm fill-mask "..."` to fill masks with the trained model."""

import sys
from pathlib import Path
from typing import Any


def main(*args, **kwargs) -> Any:
    argv = list(args[0]) if args and isinstance(args[0], (list, tuple)) else sys.argv[1:]
    if argv[:1] == ["fill-mask"]:
        from bert_mlm.fill_mask import fill_mask_command

        return fill_mask_command.main(argv[1:], prog_name="bert-mlm fill-mask", standalone_mode=True)
    # Imported here: importing kedro.framework sets up (and announces) Kedro's logging, which
    # must not end up in fill-mask's output.
    from kedro.framework.cli.utils import find_run_command
    from kedro.framework.project import configure_project

    package_name = Path(__file__).parent.name
    configure_project(package_name)

    interactive = hasattr(sys, "ps1")
    kwargs["standalone_mode"] = not interactive

    run = find_run_command(package_name)
    return run(*args, **kwargs)


if __name__ == "__main__":
    main()
