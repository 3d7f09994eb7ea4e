"""The experiment's parameters as one typed value: each ``conf/`` section built into its dataclass,
validated once, before any node runs.

One home per rule: a section's own rules live in its dataclass's ``__post_init__`` (next to the
code that uses the value); rules that span sections live here, in
:class:`ExperimentConfig`. Nodes declare the sections they take by type
(``training: TrainingConfig``) and Kedro builds them from ``params:<section>``
(``kedro.validation``); the project's hook runs these checks first, for their messages.

The code defaults equal ``conf/base`` (a test checks it), except checkpointing: ``conf/base``
checkpoints into the project's data folder, while library callers write none unless they ask.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_mlm.core.corpus import CorpusConfig
from bert_mlm.core.distributed import DistributedConfig
from bert_mlm.core.engine import DataConfig
from bert_mlm.core.errors import UserError
from bert_mlm.core.evaluation import EvaluationParameters
from bert_mlm.core.finetune import FinetuneConfig
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.model import ModelConfig
from bert_mlm.core.params import build_config
from bert_mlm.core.sequences import SequenceConfig
from bert_mlm.core.tokenizer import TokenizerConfig
from bert_mlm.core.training_config import TrainingConfig
from bert_mlm.core.tuning import TuningConfig

SECTIONS: dict[str, type] = {
    "corpus": CorpusConfig,
    "data": DataConfig,
    "tokenizer": TokenizerConfig,
    "sequences": SequenceConfig,
    "model": ModelConfig,
    "masking": MaskingConfig,
    "training": TrainingConfig,
    "evaluation": EvaluationParameters,
    "tuning": TuningConfig,
    "distributed": DistributedConfig,
    "finetune": FinetuneConfig,
}


def build_section(name: str, values: Mapping[str, Any] | None):
    """The ``name`` section of the parameters as its dataclass (unknown keys refused); a section
    that already is one (Kedro builds those the nodes declare) is taken as it is."""
    if isinstance(values, SECTIONS[name]):
        return values
    return build_config(SECTIONS[name], values, name)


@dataclass(frozen=True)
class ExperimentConfig:
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    sequences: SequenceConfig = field(default_factory=SequenceConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    evaluation: EvaluationParameters = field(default_factory=EvaluationParameters)
    tuning: TuningConfig = field(default_factory=TuningConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)

    def __post_init__(self) -> None:
        self.sequences.check_fits(self.model.max_position_embeddings)
        if self.tokenizer.extend_vocabulary and not (self.model.init_from or self.tokenizer.vocab_path):
            raise UserError(
                "tokenizer.extend_vocabulary: extends an inherited vocabulary (model.init_from or "
                "tokenizer.vocab_path); a vocabulary trained on this corpus covers it already"
            )
        if self.tuning.objective == "finetune" and self.tuning.n_trials > 0 and not self.finetune.enabled:
            raise UserError("tuning.objective: finetune needs a labelled task: set finetune.train_path")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any], other_sections: Iterable[str] = ()) -> ExperimentConfig:
        """Every section built and checked; ``other_sections``: top-level keys that are not
        experiment sections but are read elsewhere (the mask-rate variants)."""
        check_section_names(parameters, {*SECTIONS, *other_sections})
        return cls(**{name: build_section(name, parameters.get(name)) for name in SECTIONS})


RETIRED = {  # sections of earlier versions, and where their settings went
    "probe": "the downstream probe became the fine-tuning evaluation: move these settings under finetune: "
             "(train_path, eval_path, text_column, label_column, ...; mode: frozen is the frozen linear probe)",
}


def check_section_names(parameters: Mapping[str, Any], known: set[str]) -> None:
    """A top-level section nothing reads (``--params trainig.max_steps=3``) is a typo: refused."""
    for section in parameters:
        if not section or not section.isidentifier():
            raise UserError(
                f"--params {_dotted(section, parameters[section])}: {section!r} is not a section name; a parameter is "
                f"written section.key=value (e.g. masking.probability=0.3), and a section name is a plain word, "
                f"one of {sorted(known)}"
            )
        if section in RETIRED and section not in known:
            raise UserError(f"{section}: {RETIRED[section]}")
        if section not in known:
            close = difflib.get_close_matches(section, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the sections are {sorted(known)}"
            raise UserError(f"{section}: unknown parameter section{hint}")


def _dotted(key: str, value: Any) -> str:
    """The dotted name the user typed, rebuilt from the nested mapping ``--params`` made of it:
    ``../x.a.b=1`` arrives as ``{"": {"": {"/x": {"a": {"b": 1}}}}}``."""
    while isinstance(value, Mapping) and len(value) == 1:
        inner, value = next(iter(value.items()))
        key = f"{key}.{inner}"
    return key


def whole_word_requested(masking: MaskingConfig, evaluation: EvaluationParameters, tuning: TuningConfig) -> bool:
    """Whether any part of the run masks whole words: training, the evaluation protocol, or a
    tuning study that searches ``whole_word``."""
    searched = True in (tuning.search_space.get("whole_word") or ()) and tuning.n_trials > 0
    return masking.whole_word or evaluation.whole_word or searched
