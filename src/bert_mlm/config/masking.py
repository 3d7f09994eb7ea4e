"""``masking``: how the tokens to predict are chosen and replaced (BERT's 15 % and 80/10/10)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Probability, Section
from bert_mlm.errors import UserError

SEGMENTERS = ("auto", "wordpiece", "rjieba", "jieba")
SCHEDULES = ("constant", "linear")


class MaskingConfig(Section):
    """How the tokens to predict are selected and replaced (BERT's 15 % and 80/10/10)"""

    SECTION = "masking"

    probability: Probability = Field(0.15, description="share of (non-special) tokens selected for prediction")
    mask_token_fraction: float = Field(0.8, ge=0, le=1, description="of those, replaced by [MASK]")
    random_token_fraction: float = Field(
        0.1, ge=0, le=1, description="of those, replaced by a random token (the rest are kept)")
    whole_word: bool = Field(False, description="true: select whole words; all pieces of a word share one fate")
    word_segmenter: Literal[SEGMENTERS] = Field(
        "auto", description="auto | wordpiece (## pieces) | rjieba | jieba (Chinese words); auto: rjieba (jieba's "
                            "words, 15x faster) on mostly-CJK text")
    # Ankner et al. 2023: a decreasing rate beat every constant one.
    schedule: Literal[SCHEDULES] = Field(
        "constant", description="constant | linear: from probability at the first step to final_probability at "
                                "the last")
    final_probability: Probability | None = Field(
        None, description="the end of a linear schedule (e.g. 0.15 from a start of 0.30)")

    @model_validator(mode="after")
    def _fractions_and_schedule(self) -> MaskingConfig:
        if self.mask_token_fraction + self.random_token_fraction > 1.0 + 1e-9:
            raise UserError("masking.mask_token_fraction + masking.random_token_fraction = "
                            f"{self.mask_token_fraction + self.random_token_fraction:.3f} must not exceed 1")
        if self.schedule == "linear" and self.final_probability is None:
            raise UserError("masking.final_probability: a linear masking.schedule needs its end value")
        return self

    def at_step(self, step: int, total_steps: int) -> MaskingConfig:
        """The masking of optimizer step ``step`` (0-based) of ``total_steps``: a pure function of
        the step, so a resumed run masks as the uninterrupted one."""
        if self.schedule == "constant":
            return self
        progress = step / (total_steps - 1) if total_steps > 1 else 1.0
        rate = self.probability + (self.final_probability - self.probability) * min(max(progress, 0.0), 1.0)
        return self.replace(probability=rate, schedule="constant", final_probability=None)
