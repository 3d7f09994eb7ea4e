"""`bert-mlm fill-mask "The [MASK] sat on the mat."`: top-k fills from a trained model.

Loads the latest version of the catalog's ``trained_model`` (``data/06_models/masked_lm``), a
named version (``--version 2026-12-02T15.00.00.000Z``), a mask-rate variant's model
(``--variant mask_030``: ``data/06_models/mask_030/masked_lm``), or any model directory (``--model DIR``).
Also usable from Python: ``from bert_mlm.fill_mask import fill_mask``.
"""

from __future__ import annotations

from pathlib import Path

import click
from kedro.io.core import Version

from bert_mlm.core.evaluate.fill_mask import fill_mask_examples
from bert_mlm.core.model.bert import open_model
from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset
from bert_mlm.errors import UserError, first_line

DEFAULT_MODELS = "data/06_models/masked_lm"


def load_masked_lm(model: str | None = None, version: str | None = None, models_dir: str = DEFAULT_MODELS) -> MaskedLM:
    if model:
        try:  # its config and weights opened first: a broken folder is one line, not a traceback
            directory = open_model(model, "--model")
        except UserError as error:
            raise click.UsageError(str(error)) from error
        return MaskedLMDataset(directory).load()
    dataset = MaskedLMDataset(models_dir, version=Version(version, None))
    try:
        return dataset.load()
    except Exception as error:
        where = Path(models_dir).absolute()
        relative = "" if Path(models_dir).is_absolute() else f", relative to the current folder {str(Path.cwd())!r}"
        in_a_project = (Path.cwd() / "pyproject.toml").is_file() and (Path.cwd() / "conf").is_dir()
        hint = ("run `kedro run` first" if in_a_project
                else "run this in the project's folder (or run `kedro run` there first)")
        raise click.UsageError(f"no trained model {'version ' + repr(version) + ' ' if version else ''}under "
                               f"{str(where)!r}{relative}: {hint}, or pass --model DIR "
                               f"({first_line(error)})") from error


def fill_mask(sentences: list[str], model: str | None = None, version: str | None = None, top_k: int = 5,
              variant: str | None = None) -> list[dict]:
    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    if model and (variant or version):
        raise ValueError(f"--model: a model directory is one model; {'--variant' if variant else '--version'} "
                         "chooses among the project's trained models: give one or the other")
    if variant and variant not in VARIANTS:  # the variant becomes part of a path: the configured names, never ../..
        raise ValueError(f"--variant: {variant!r} is not a mask_rate_comparison variant; the variants are "
                         f"{', '.join(VARIANTS)}")
    bundle = load_masked_lm(model, version, f"data/06_models/{variant}/masked_lm" if variant else DEFAULT_MODELS)
    return fill_mask_examples(bundle.model, bundle.tokenizer, sentences, top_k, parameter="fill-mask SENTENCES")


@click.command("fill-mask")
@click.argument("sentences", nargs=-1, required=True)
@click.option("--model", "model", default=None, help="A model directory (default: the latest trained version).")
@click.option("--version", default=None, help="A version of data/06_models/masked_lm (default: the latest).")
@click.option("--variant", default=None, help="A mask_rate_comparison variant's model, e.g. mask_030.")
@click.option("--top-k", default=5, show_default=True, type=click.IntRange(1, 100))
def fill_mask_command(sentences: tuple[str, ...], model: str | None, version: str | None, variant: str | None,
                      top_k: int) -> None:
    """Print the top-k fills of [MASK] in each SENTENCE."""
    try:
        examples = fill_mask(list(sentences), model, version, top_k, variant)
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    for example in examples:
        click.echo(example["sentence"])
        per_mask = example.get("per_mask", [example["predictions"]])
        for number, predictions in enumerate(per_mask, 1):
            if len(per_mask) > 1:
                click.echo(f" [MASK] {number} of {len(per_mask)} (each filled on its own, the others left masked):")
            for rank, prediction in enumerate(predictions, 1):
                click.echo(f"  {rank}. {prediction['token']:<20} {prediction['score']:.4f}")
