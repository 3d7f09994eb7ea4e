"""The model card: the ``README.md`` in a trained model's folder, so that the folder can be
uploaded to the Hugging Face Hub as it is and, six weeks later, still says which run made it.

Hugging Face front matter (``language`` from the corpus's script, a ``license`` placeholder,
``tags``, the Hub ``datasets`` where known, ``base_model`` for a continued Hub model), rendered by
``huggingface_hub``'s own :class:`~huggingface_hub.ModelCardData`; then the training data, the
training steps, the masking, the evaluation results, the before/after of continued pretraining,
the fine-tuning result, and how to use and remake the model. Plain ``transformers`` ignores the
file. Its values are redacted before they are rendered (:func:`bert_mlm.core.common.redaction.redact`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bert_mlm.core.common.formatting import format_value, with_error
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.record.run_record import (
    command_line,
    describe_code,
    describe_software,
    hub_datasets,
    sources_line,
    token_store_line,
)

TAGS = ["bert", "fill-mask", "masked-lm", "bert-mlm"]
LICENSE_PLACEHOLDER = "unknown"
LICENSE_NOTE = "  # placeholder: set the model's license before uploading (the corpus's terms may restrict it)"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")

# The evaluation rows of the card, in the report's order: (metric key, label).
EVALUATION = (
    ("eval_accuracy", "masked-token accuracy (top-1)"),
    ("eval_top5_accuracy", "top-5 accuracy"),
    ("eval_loss", "masked-token loss"),
    ("eval_perplexity", "perplexity"),
    ("baseline_accuracy", "most-frequent-token reference accuracy"),
    ("eval_loss_start", "loss of the starting model (model.init_from)"),
    ("eval_accuracy_start", "accuracy of the starting model"),
    ("eval_loss_change", "loss change from the starting model (paired)"),
    ("extra_eval_accuracy", "accuracy on evaluation.corpus_path"),
    ("extra_eval_loss", "loss on evaluation.corpus_path"),
    ("extra_eval_loss_start", "loss of the starting model on evaluation.corpus_path"),
    ("extra_eval_loss_change", "loss change on evaluation.corpus_path (paired)"),
    ("eval_masked_tokens", "masked tokens scored"),
)
CHANGE_SENTENCES = ("eval_change_summary", "extra_eval_change_summary")


@dataclass(frozen=True)
class ModelCard:
    """A card and the model it describes (``model_version``: the trained model's version, which
    names its folder; None for a model that no run saved)."""

    model_version: str | None
    text: str


def is_hub_id(name: str | None) -> bool:
    """``bert-base-chinese`` or ``google-bert/bert-base-uncased``, not a folder of this machine."""
    return bool(name) and _HUB_ID.fullmatch(str(name)) is not None and not Path(str(name)).exists()


def front_matter(record: Mapping[str, Any], language: str | None) -> str:
    """The YAML between the card's ``---`` lines."""
    from huggingface_hub import ModelCardData

    init_from = record.get("init_from")
    corpus = (record.get("sections") or {}).get("corpus") or {}
    data = ModelCardData(
        language=language, license=LICENSE_PLACEHOLDER, library_name="transformers", pipeline_tag="fill-mask",
        tags=[*TAGS, *(["continued-pretraining"] if init_from else [])], datasets=hub_datasets(corpus) or None,
        base_model=init_from if is_hub_id(init_from) else None,
    )
    return "\n".join(line + LICENSE_NOTE if line == f"license: {LICENSE_PLACEHOLDER}" else line
                     for line in data.to_yaml().splitlines())


def model_card(metrics: Mapping[str, Any], record: Mapping[str, Any] | None) -> ModelCard:
    """The card of the model that ``metrics`` (``metrics.json``: its evaluation, training summary
    and fine-tuning result) describes, with ``record``: the record of the run that trained it
    (None where there is none: a model trained before runs were recorded)."""
    metrics, record = redact(dict(metrics)), redact(dict(record or {}))
    version = metrics.get("model_version")
    corpus = record.get("corpus") or {}
    sections = record.get("sections") or {}
    language = corpus.get("language")
    init_from = record.get("init_from")
    origin = f"continued from `{init_from}`" if init_from else "trained from scratch"
    lines = [
        "---", front_matter(record, language), "---", "",
        f"# bert-mlm masked language model {version or ''}".rstrip(), "",
        f"A BERT masked language model (`BertForMaskedLM`) {origin} with bert-mlm"
        + (f", in the run `{version}` (its version: the folder `masked_lm/{version}`)." if version else "."), "",
        "## Training data", "",
        f"- corpus: `{corpus.get('source', 'unknown')}`",
        f"- language: {language or 'unknown (set `language:` above)'}",
        f"- documents: {_counts(corpus.get('documents'))}",
        *([f"- sources (train split): {sources_line(corpus)}"] if sources_line(corpus) else []),
        f"- token store: {token_store_line(corpus)}" if corpus.get("token_store") else "- token store: not recorded",
    ]
    if "train_tokens" in metrics:
        lines.append(f"- training tokens seen: {format_value(metrics['train_tokens'])}")
    lines += ["", "## Training", "", *_rows(_training_rows(metrics, sections)), "",
              "## Masking", "", _masking(metrics, sections.get("masking") or {}), "",
              "## Evaluation results", ""]
    evaluation = [(label, with_error(metrics, key)) for key, label in EVALUATION if key in metrics]
    if evaluation:
        lines += [f"Fixed protocol: {_percent(metrics.get('eval_mask_probability', 0.15))} of the tokens of the "
                  f"{metrics.get('eval_split', 'test')} split masked with seed {metrics.get('eval_seed', '?')} "
                  "(80/10/10), the same masks for every model; ± is one standard error.", "",
                  *_rows(evaluation)]
    else:
        lines.append("Not evaluated yet (`kedro run --pipelines evaluation`).")
    changes = [metrics[key] for key in CHANGE_SENTENCES if metrics.get(key)]
    if changes:
        lines += ["", "Before and after continued pretraining:", "", *(f"- {sentence}" for sentence in changes)]
    if metrics.get("finetune_summary"):
        lines += ["", "## Fine-tuning", "",
                  f"On `{metrics.get('finetune_dataset', '?')}`: {metrics['finetune_summary']}."]
    lines += [
        "", "## How to use", "", "```python", "from transformers import pipeline", "",
        'fill = pipeline("fill-mask", model="path/to/this/folder")',
        f'print(fill("{_example(metrics, language)}"))', "```", "",
        "## How it was made", "",
    ]
    if record:
        lines += [f"- command: `{record.get('command') or command_line(record)}` (run `{record.get('run_id')}`)",
                  f"- code: {describe_code(record.get('code'))}",
                  f"- software: {describe_software(record.get('software'))}",
                  f"- device: {record.get('device', 'unknown')}",
                  "- every setting: `run_config.json` of the same run (`data/08_reporting/run_config.json/"
                  f"{record.get('run_id')}/`)"]
    else:
        lines.append("No run record: the model was trained before bert-mlm recorded its runs.")
    lines += ["", "## License", "",
              f"Not set: replace `license: {LICENSE_PLACEHOLDER}` in the front matter with the model's license "
              "before uploading; the training corpus's terms may restrict it.", ""]
    return ModelCard(version, "\n".join(lines))


def _training_rows(metrics: Mapping[str, Any], sections: Mapping[str, Any]) -> list[tuple[str, str]]:
    training, model = sections.get("training") or {}, sections.get("model") or {}
    rows = [("steps", format_value(metrics.get("train_steps", training.get("max_steps")))),
            ("batch size", format_value(training.get("batch_size"))),
            ("learning rate", format_value(metrics.get("learning_rate", training.get("learning_rate")))),
            ("precision, device", f"{metrics.get('precision', '?')} on {metrics.get('device', '?')}"),
            ("parameters", format_value(metrics.get("parameter_count"))),
            ("architecture", ", ".join(f"{key} {model[key]}" for key in (
                "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings") if key in model) or "?"),
            ("seed", format_value(training.get("seed")))]
    return [(label, value) for label, value in rows if value not in ("?", "n/a")]


def _masking(metrics: Mapping[str, Any], masking: Mapping[str, Any]) -> str:
    probability = metrics.get("mask_probability", masking.get("probability"))
    if probability is None:
        return "Not recorded."
    source = metrics.get("mask_probability_source")
    origin = {"tuning": " (the mask-rate study's best)", "variant": " (a mask-rate variant)",
              "parameters": " (as configured)"}.get(source, "")
    token = metrics.get("mask_token_fraction", masking.get("mask_token_fraction", 0.8))
    random = metrics.get("random_token_fraction", masking.get("random_token_fraction", 0.1))
    whole = metrics.get("whole_word", masking.get("whole_word"))
    words = f"whole words ({metrics.get('word_segmenter', masking.get('word_segmenter', 'wordpiece'))})" if whole \
        else "single tokens"
    return (f"{_percent(probability)} of the tokens masked{origin}, {words}: {_percent(token)} replaced by [MASK], "
            f"{_percent(random)} by a random token, the rest kept; new masks every epoch.")


def _rows(rows: list[tuple[str, str]]) -> list[str]:
    return ["| | |", "|---|---|", *(f"| {label} | {value} |" for label, value in rows)]


def _percent(value: Any) -> str:
    return f"{100 * value:g} %" if isinstance(value, (int, float)) else "?"


def _counts(counts: Any) -> str:
    if not isinstance(counts, Mapping) or not counts:
        return "n/a"
    return ", ".join(f"{format_value(count)} {split}" for split, count in counts.items())


def _example(metrics: Mapping[str, Any], language: str | None) -> str:
    for example in metrics.get("fill_mask_examples") or ():
        sentence = str(example.get("sentence", ""))
        if "[MASK]" in sentence and '"' not in sentence and "\\" not in sentence and len(sentence) < 200:
            return sentence
    return "北京是中国的[MASK]都。" if language == "zh" else "The capital of France is [MASK]."
