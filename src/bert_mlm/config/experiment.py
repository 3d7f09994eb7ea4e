"""The experiment's parameters as one typed value: every section built once, with the rules that
span sections, before any node runs (the project's hook)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.config.corpus import CorpusConfig
from bert_mlm.config.data import DataConfig
from bert_mlm.config.distributed import DistributedConfig
from bert_mlm.config.evaluation import EvaluationParameters
from bert_mlm.config.finetune import FinetuneConfig
from bert_mlm.config.masking import MaskingConfig
from bert_mlm.config.model import ModelConfig
from bert_mlm.config.sequences import SequenceConfig
from bert_mlm.config.tokenizer import TokenizerConfig
from bert_mlm.config.tracking import TrackingConfig
from bert_mlm.config.training import TrainingConfig
from bert_mlm.config.tuning import TuningConfig
from bert_mlm.config.variants import VariantOverrides, variant_overrides
from bert_mlm.errors import UserError, did_you_mean

RETIRED = {  # sections of earlier versions, and where their settings went
    "probe": "the downstream probe became the fine-tuning evaluation: move these settings under finetune: "
             "(train_path, eval_path, text_column, label_column, ...; mode: frozen is the frozen linear probe)",
}


class ExperimentConfig(Section):
    """Every section (each its key, its type, and its file under conf/base: parameters_<key>.yml),
    and the rules that span sections."""

    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    sequences: SequenceConfig = Field(default_factory=SequenceConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    masking: MaskingConfig = Field(default_factory=MaskingConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    evaluation: EvaluationParameters = Field(default_factory=EvaluationParameters)
    tuning: TuningConfig = Field(default_factory=TuningConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    finetune: FinetuneConfig = Field(default_factory=FinetuneConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    # The mask-rate variants (mask_015: {overrides: ...}), by name.
    variants: dict[str, VariantOverrides] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _across_sections(self) -> ExperimentConfig:
        if self.sequences.max_length > self.model.max_position_embeddings:
            raise UserError(f"sequences.max_length: {self.sequences.max_length} exceeds model.max_position_embeddings "
                            f"({self.model.max_position_embeddings})")
        if self.tokenizer.extend_vocabulary and not (self.model.init_from or self.tokenizer.vocab_path):
            raise UserError("tokenizer.extend_vocabulary: extends an inherited vocabulary (model.init_from or "
                            "tokenizer.vocab_path); a vocabulary trained on this corpus covers it already")
        if self.tuning.objective == "finetune" and self.tuning.n_trials > 0 and not self.finetune.enabled:
            raise UserError("tuning.objective: finetune needs a labelled task: set finetune.train_path")
        if self.tuning.n_trials > 0:
            self._continued_study()
        chosen, tasks = self.tuning.finetune_task, self.finetune.tasks
        if chosen != "mean" and self.finetune.enabled and chosen not in tasks:
            raise UserError(f"tuning.finetune_task: {chosen!r} is not one of finetune.tasks "
                            f"({', '.join(tasks) or 'none: one task, finetune.train_path'}) or mean")
        for name, overrides in self.variants.items():
            try:
                overrides.sections(self.masking, self.training)
            except UserError as error:
                raise UserError(f"{name}.overrides: {error}") from error
        return self

    def _continued_study(self) -> None:
        """The settings a study of continued pretraining needs: a starting model and general text to
        measure forgetting on, and replay to search a replay share."""
        continued = self.tuning.objective == "continued"
        if continued and not self.model.init_from:
            raise UserError("tuning.objective: continued weighs the domain's gain against forgetting; it needs "
                            "model.init_from (the model to continue)")
        if continued and not self.evaluation.corpus_path:
            raise UserError("tuning.objective: continued measures forgetting on general text: set "
                            "evaluation.corpus_path (corpus.replay's file is scored on its held-out side)")
        if "replay_share" in self.tuning.search_space and not continued:
            raise UserError("tuning.search_space.replay_share: a replay share trades the domain's gain against "
                            "forgetting; search it with tuning.objective: continued")
        if "replay_share" in self.tuning.search_space and self.corpus.replay is None:
            raise UserError("tuning.search_space.replay_share: set corpus.replay (the general text and a starting "
                            "share) to search its share")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any], variants: Iterable[str] = ()) -> ExperimentConfig:
        """Every section built and checked (unknown sections refused); ``variants``: the names of
        the mask-rate variants, top-level keys beside the sections."""
        variants = tuple(variants)
        check_section_names(parameters, {*SECTIONS, *variants})
        return cls(**{name: SECTIONS[name].build(parameters.get(name)) for name in SECTIONS},
                   variants={name: variant_overrides(name, parameters.get(name)) for name in variants})

    def parameters(self) -> dict[str, Any]:
        """The parameters as the nodes take them: each section (and variant's overrides) typed."""
        return {**{name: getattr(self, name) for name in SECTIONS},
                **{name: {"overrides": overrides} for name, overrides in self.variants.items()}}


SECTIONS: dict[str, type[Section]] = {name: field.annotation for name, field in ExperimentConfig.model_fields.items()
                                      if name != "variants"}


def check_section_names(parameters: Mapping[str, Any], known: set[str]) -> None:
    """A top-level section nothing reads (``--params trainig.max_steps=3``) is a typo: refused."""
    for section in parameters:
        if not section or not str(section).isidentifier():
            raise UserError(f"--params {_dotted(section, parameters[section])}: {section!r} is not a section name; a "
                            f"parameter is written section.key=value (e.g. masking.probability=0.3), and a section "
                            f"name is a plain word, one of {sorted(known)}")
        if section in RETIRED and section not in known:
            raise UserError(f"{section}: {RETIRED[section]}")
        if section not in known:
            hint = did_you_mean(section, known).rstrip() or f"the sections are {sorted(known)}"
            raise UserError(f"{section}: unknown parameter section; {hint}")


def _dotted(key: str, value: Any) -> str:
    """The dotted name the user typed, rebuilt from the nested mapping ``--params`` made of it:
    ``../x.a.b=1`` arrives as ``{"": {"": {"/x": {"a": {"b": 1}}}}}``."""
    while isinstance(value, Mapping) and len(value) == 1:
        inner, value = next(iter(value.items()))
        key = f"{key}.{inner}"
    return key


def whole_word_requested(masking: MaskingConfig, evaluation: EvaluationParameters, tuning: TuningConfig) -> bool:
    """Whether any part of the run masks whole words: training (whole words or spans of them), the
    evaluation protocol, or a tuning study that searches ``whole_word`` or a span scheme."""
    searched = tuning.n_trials > 0 and (True in (tuning.search_space.get("whole_word") or ())
                                        or any(span != "none" for span in tuning.search_space.get("span") or ()))
    return masking.words or evaluation.whole_word or searched
