"""Every section refuses each kind of bad value with one line naming ``section.field``: a string
for a number, a value out of range, a choice that is not one, an unknown key (with a
did-you-mean), true/false for a number. The values are taken from each section's own
declarations, so a field added later is covered too."""

from __future__ import annotations

import re
from typing import Literal

import pytest

from bert_mlm.config import SECTIONS, ExperimentConfig, MaskingConfig, TrainingConfig, VariantOverrides
from bert_mlm.config.base import alternatives
from bert_mlm.errors import UserError
from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

KINDS = ("string for a number", "out of range", "not a choice", "unknown key", "true for a number")


def numeric_field(section, bounded: bool = False):
    """The section's first numeric field (with a range when ``bounded``): (name, kind, bounds)."""
    for name, field in section.model_fields.items():
        for kind, detail in alternatives(field):
            if kind in (int, float) and (detail or not bounded):
                return name, kind, detail
    return None


def bad_value(section, kind: str):
    """(field, value) of the given kind for ``section``, or None where it declares no such field."""
    if kind == "unknown key":
        first = next(iter(section.model_fields))
        return first + "s", 1  # a near miss: the message suggests the real name
    if kind == "not a choice":
        choice = next((name for name, field in section.model_fields.items()
                       if {k for k, _ in alternatives(field)} - {type(None)} == {Literal}), None)
        return None if choice is None else (choice, "nonsense")
    found = numeric_field(section, bounded=kind == "out of range")
    if found is None:
        return None
    name, number, bounds = found
    if kind == "string for a number":
        return name, "1"
    if kind == "true for a number":
        return name, True
    value = (bounds["gt"] if "gt" in bounds else bounds["ge"] - 1) if {"gt", "ge"} & set(bounds) else (
        bounds.get("lt", bounds.get("le", 0) + 1))
    return name, number(value)


CASES = [(name, kind) for name in SECTIONS for kind in KINDS if bad_value(SECTIONS[name], kind) is not None]


@pytest.mark.parametrize(("section", "kind"), CASES, ids=[f"{s}: {k}" for s, k in CASES])
def test_each_kind_of_bad_value_is_one_line_naming_the_field(section, kind):
    field, value = bad_value(SECTIONS[section], kind)
    with pytest.raises(UserError) as raised:
        ExperimentConfig.from_parameters({section: {field: value}})
    message = str(raised.value)
    assert "\n" not in message
    if kind == "unknown key":
        assert message.startswith(f"{section}: unknown parameter(s) {section}.{field}; did you mean "
                                  f"{field.removesuffix('s')!r}?"), message
    else:
        assert message.startswith(f"{section}.{field}: {value!r} "), message
        expected = {"string for a number": "must be ", "out of range": "must be ", "not a choice": "is not one of (",
                    "true for a number": "must be a number, not true/false"}[kind]
        assert expected in message, message


def test_every_section_meets_every_kind_it_declares():
    """Each section is covered by an unknown key, and by the kinds its fields can have."""
    covered = {name for name, _ in CASES}
    assert covered == set(SECTIONS)
    assert {kind for _, kind in CASES} == set(KINDS)


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [  # The holes the issue found: each passed, then failed late or never.
        ("masking", {"mask_token_fraction": "0.8"}, "masking.mask_token_fraction: '0.8' must be a number in [0, 1]"),
        ("training", {"weight_decay": -5}, "training.weight_decay: -5 must be >= 0"),
        ("training", {"adam_beta2": 7}, "training.adam_beta2: 7 must be in [0, 1)"),
        ("training", {"max_nonfinite_steps": 0}, "training.max_nonfinite_steps: 0 must be a positive integer"),
        ("model", {"hidden_dropout_prob": "0.1"}, "model.hidden_dropout_prob: '0.1' must be a number in [0, 1)"),
        ("training", {"learning_rate": "1e-3"}, "training.learning_rate: '1e-3' must be a number > 0 or 'auto'"),
        ("training", {"compile": "fast"}, "training.compile: 'fast' must be true, false or one of ('default', "
                                          "'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs')"),
        ("masking", {"probability": float("nan")}, "masking.probability: nan must be a number in the open interval "
                                                   "(0, 1)"),
        ("tokenizer", {"strip_accents": "yes"}, "tokenizer.strip_accents: 'yes' must be true, false or null"),
        ("data", {"workers": 0}, "data.workers: 0 must be a positive integer"),
        ("distributed", {"rdzv_endpoint": "10.0.0.1"},
         "distributed.rdzv_endpoint: '10.0.0.1' is not host:port (or auto)"),
        ("distributed", {"nnodes": 2}, "distributed.rdzv_endpoint: 'auto' is for one machine; with "
                                       "distributed.nnodes 2 give node 0's host:port (the same on every machine)"),
        ("mask_015", {"overrides": {"masking": {"whole_word": "yes"}}},
         "mask_015.overrides: masking.whole_word: 'yes' must be true or false"),
    ],
)
def test_the_values_that_used_to_pass_are_refused(section, values, message):
    with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
        ExperimentConfig.from_parameters({section: values}, variants=VARIANTS)


def test_library_callers_get_the_same_line():
    with pytest.raises(UserError, match=r"^training\.max_steps: 0 must be a positive integer$"):
        TrainingConfig(max_steps=0)
    with pytest.raises(UserError, match=r"^masking\.probability: 1\.5 must be in the open interval \(0, 1\)$"):
        MaskingConfig(1.5)  # positional, in the fields' order
    assert MaskingConfig(0.3, whole_word=True) == MaskingConfig(probability=0.3, whole_word=True)


def test_a_section_is_updated_as_a_whole():
    masking = MaskingConfig()
    assert masking.updated({"probability": 0.3}).probability == 0.3
    with pytest.raises(UserError, match=r"masking\.mask_token_fraction \+ masking\.random_token_fraction = 1\.100"):
        masking.updated({"random_token_fraction": 0.3})
    overrides = VariantOverrides(masking={"probability": 0.45}, training={"checkpoint_dir": "x"})
    assert overrides.sections(masking, TrainingConfig()) == (MaskingConfig(0.45), TrainingConfig(checkpoint_dir="x"))


def test_replay_is_a_mixture_of_the_domain_and_the_general_text():
    """corpus.replay: the domain (corpus.path, or corpus.sources' weights scaled) at 1 - share of each
    epoch, the general text at the share, read for its train split only; a validated section
    validated again is the same; the cases that cannot mix are one line each."""
    from bert_mlm.config import CorpusConfig
    from bert_mlm.errors import UserError

    corpus = CorpusConfig(path="reviews.csv", text_column="review", replay={"path": "news.txt", "share": 0.1})
    assert corpus.path is None and corpus.replay == {"path": "news.txt", "share": 0.1}
    assert corpus.sources == {"domain": {"path": "reviews.csv", "weight": 0.9}, "replay": {
        "path": "news.txt", "text_column": "review", "weight": 0.1, "train_only": True}}
    assert CorpusConfig(**corpus.model_dump()) == corpus
    mixed = CorpusConfig(sources={"a": {"path": "a.txt", "weight": 3}, "b": {"path": "b.txt", "weight": 1}},
                         replay={"path": "news.txt", "share": 0.2, "text_column": "text"}).sources
    assert {name: round(spec["weight"], 6) for name, spec in mixed.items()} == {"a": 0.6, "b": 0.2, "replay": 0.2}
    for values, message in [
        ({"replay": {"path": "news.txt", "share": 0.1}}, r"corpus\.replay: replay mixes general text into a domain"),
        ({"path": "a.txt", "replay": {"path": "news.txt", "share": 1.5}}, r"corpus\.replay\.share: 1\.5 must be"),
        ({"path": "a.txt", "replay": {"share": 0.1}}, r"corpus\.replay\.path: the general text to replay"),
        ({"path": "a.txt", "replay": {"path": "n.txt", "share": 0.1, "weight": 1}}, r"corpus\.replay: unknown key"),
        ({"sources": {"a": {"path": "a.txt", "repeat": 2}}, "replay": {"path": "n.txt", "share": 0.1}},
         r"corpus\.replay: the domain's sources need weights"),
        ({"sources": {"replay": {"path": "a.txt", "weight": 1}}, "replay": {"path": "n.txt", "share": 0.1}},
         r"corpus\.sources: 'replay' names corpus\.replay's source"),
    ]:
        with pytest.raises(UserError, match=message):
            CorpusConfig(**values)
