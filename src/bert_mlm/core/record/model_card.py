"""The model card: the ``README.md`` in a trained model's folder, so that the folder can be
uploaded to the Hugging Face Hub as it is and, six weeks later, still says which run made it.

Hugging Face front matter rendered by ``huggingface_hub``'s own :class:`~huggingface_hub.ModelCardData`,
then the training, the results, and how to use and remake the model. What it quotes is escaped and
holds no local folder (:func:`shown`); the run record it is made from is redacted.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bert_mlm.core.common.formatting import format_value
from bert_mlm.core.record.results import ModelResults, evaluation_rows
from bert_mlm.core.record.run_record import RunRecord, hub_datasets
from bert_mlm.core.train.result import TrainingSummary

TAGS = ["bert", "fill-mask", "masked-lm", "bert-mlm"]
LICENSE_PLACEHOLDER = "unknown"
LICENSE_NOTE = "  # placeholder: set the model's license before uploading (the corpus's terms may restrict it)"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# An absolute local path: "/" or "~/" at the start, or after a space, "=", a quote or a bracket (not a
# URL's path, not a closing tag's "</").
_LOCAL_PATH = re.compile(r"(?<![^\s='\"(\[,])~?/(?!/)[^\s,;'\"`()<>]+")


@dataclass(frozen=True)
class ModelCard:
    """A card and the model it describes (``model_version``: the trained model's version, which
    names its folder; None for a model that no run saved: then nothing is written)."""

    model_version: str | None
    text: str


def shown(value: Any) -> str:
    """A setting or a result's text as the card quotes it: on one line (a newline could open a
    heading or a ``---`` block), its markup escaped (``<script>``), no backtick or table bar to end
    its span or cell, and absolute local paths as their file names (the card is uploaded; this
    machine's folders are nobody's business)."""
    text = _LOCAL_PATH.sub(lambda match: PurePosixPath(match[0]).name or match[0], " ".join(str(value).split()))
    return html.escape(text, quote=False).replace("`", "'").replace("|", "/")


def code(value: Any) -> str:
    return f"`{shown(value)}`"


def front_matter(record: RunRecord, language: str | None) -> str:
    """The YAML between the card's ``---`` lines."""
    from huggingface_hub import ModelCardData

    init_from = record.init_from
    # A Hub id (bert-base-chinese, google-bert/bert-base-uncased), not a folder of this machine.
    hub_id = bool(init_from) and _HUB_ID.fullmatch(str(init_from)) is not None and not Path(str(init_from)).exists()
    data = ModelCardData(language=language, license=LICENSE_PLACEHOLDER, library_name="transformers",
                         pipeline_tag="fill-mask", tags=[*TAGS, *(["continued-pretraining"] if init_from else [])],
                         datasets=hub_datasets(record.section("corpus")) or None,
                         base_model=init_from if hub_id else None)
    return "\n".join(line + LICENSE_NOTE if line == f"license: {LICENSE_PLACEHOLDER}" else line
                     for line in data.to_yaml().splitlines())


def model_card(results: ModelResults, record: RunRecord | None) -> ModelCard:
    """The card of ``results``' model, with ``record``: that of the run that trained it (None: a
    model trained before runs were recorded)."""
    version, evaluation, training = results.model_version, results.evaluation, results.training
    made = record or RunRecord()
    corpus, language = made.corpus, made.corpus.language
    origin = f"continued from {code(made.init_from)}" if made.init_from else "trained from scratch"
    lines = [
        "---", front_matter(made, language), "---", "",
        f"# bert-mlm masked language model {version or ''}".rstrip(), "",
        f"A BERT masked language model (`BertForMaskedLM`) {origin} with bert-mlm"
        + (f", in the run `{version}` (its version: the folder `masked_lm/{version}`)." if version else "."), "",
        "## Training data", "",
        f"- corpus: {code(corpus.source or 'unknown')}",
        f"- language: {language or 'unknown (set `language:` above)'}",
        "- documents: " + (", ".join(f"{format_value(n)} {split}" for split, n in corpus.documents.items()) or "n/a"),
        *([f"- sources (train split): {shown(corpus.sources_line)}"] if corpus.sources_line else []),
        f"- token store: {corpus.token_store_line}" if corpus.token_store else "- token store: not recorded",
    ]
    if training is not None:
        lines.append(f"- training tokens seen: {format_value(training.train_tokens)}")
    lines += ["", "## Training", "", *_rows(_training_rows(training, made)), "",
              "## Masking", "", _masking(training, made.section("masking")), "", "## Evaluation results", ""]
    if evaluation is not None:
        lines += [f"Fixed protocol: {_percent(evaluation.mask_probability)} of the tokens of the {evaluation.split} "
                  f"split masked with seed {evaluation.seed} (80/10/10), the same masks for every model; ± is one "
                  "standard error.", "", *_rows(evaluation_rows(evaluation))]
        if evaluation.change_summaries:
            lines += ["", "Before and after continued pretraining:", "",
                      *(f"- {shown(sentence)}" for sentence in evaluation.change_summaries)]
    else:
        lines.append("Not evaluated yet (`kedro run --pipelines evaluation`).")
    if results.finetune:
        lines += ["", "## Fine-tuning", ""]
        lines += [f"On {code(task.dataset or '?')}{f' ({shown(task.task)})' if task.task else ''}: "
                  f"{shown(task.summary)}." for task in results.finetune]
    lines += ["", "## How to use", "", "```python", "from transformers import pipeline", "",
              'fill = pipeline("fill-mask", model="path/to/this/folder")',
              f'print(fill("{_example(evaluation.fill_mask_examples if evaluation else (), language)}"))', "```", "",
              "## How it was made", ""]
    if record is not None:
        lines += [f"- command: {code(record.command)} (run `{record.run_id}`)", f"- code: {shown(record.code_line)}",
                  f"- software: {record.software_line}", f"- device: {shown(record.device or 'unknown')}",
                  "- every setting: `run_config.json` of the same run (`data/08_reporting/run_config.json/"
                  f"{record.run_id}/`)"]
    else:
        lines.append("No run record: the model was trained before bert-mlm recorded its runs.")
    lines += ["", "## License", "",
              f"Not set: replace `license: {LICENSE_PLACEHOLDER}` in the front matter with the model's license "
              "before uploading; the training corpus's terms may restrict it.", ""]
    return ModelCard(version, "\n".join(lines))


def _training_rows(training: TrainingSummary | None, record: RunRecord) -> list[tuple[str, str]]:
    configured, model = record.section("training"), record.section("model")
    steps = training.train_steps if training is not None else configured.get("max_steps")
    shape = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings")
    rows = [("steps", format_value(steps)), ("batch size", format_value(configured.get("batch_size"))),
            ("learning rate", format_value(configured.get("learning_rate") if training is None
                                           else training.learning_rate)),
            ("precision, device", f"{training.precision} on {training.device}" if training is not None else "?"),
            ("parameters", format_value(training.parameter_count if training is not None else None)),
            ("architecture", ", ".join(f"{key} {model[key]}" for key in shape if key in model) or "?"),
            ("seed", format_value(configured.get("seed")))]
    return [(label, value) for label, value in rows if value not in ("?", "n/a")]


def _masking(training: TrainingSummary | None, masking: dict[str, Any]) -> str:
    """The masking as trained (the training summary), else as configured (the run record)."""
    trained = training or TrainingSummary()

    def value(found: Any, setting: str, default: Any = None) -> Any:
        return found if found is not None else masking.get(setting, default)

    probability = value(trained.mask_probability, "probability")
    if probability is None:
        return "Not recorded."
    origin = {"tuning": " (the mask-rate study's best)", "variant": " (a mask-rate variant)",
              "parameters": " (as configured)"}.get(trained.mask_probability_source, "")
    token = value(trained.mask_token_fraction, "mask_token_fraction", 0.8)
    random = value(trained.random_token_fraction, "random_token_fraction", 0.1)
    segmenter = value(trained.word_segmenter, "word_segmenter", "wordpiece")
    words = f"whole words ({segmenter})" if value(trained.whole_word, "whole_word") else "single tokens"
    return (f"{_percent(probability)} of the tokens masked{origin}, {words}: {_percent(token)} replaced by [MASK], "
            f"{_percent(random)} by a random token, the rest kept; new masks every epoch.")


def _rows(rows: list[tuple[str, str]]) -> list[str]:
    return ["| | |", "|---|---|", *(f"| {label} | {value} |" for label, value in rows)]


def _percent(value: Any) -> str:
    return f"{100 * value:g} %" if isinstance(value, (int, float)) else "?"


def _example(examples, language: str | None) -> str:
    """A fill-mask sentence for the usage example: one of the evaluation's that fits a Python string."""
    for example in examples:
        sentence = str(example.get("sentence", ""))
        if "[MASK]" in sentence and not any(c in sentence for c in '"\\`\n') and len(sentence) < 200:
            return html.escape(sentence, quote=False)
    return "北京是中国的[MASK]都。" if language == "zh" else "The capital of France is [MASK]."
