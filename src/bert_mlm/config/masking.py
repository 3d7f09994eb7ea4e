"""``masking``: how the tokens to predict are chosen and replaced (BERT's 15 % and 80/10/10)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Probability, Section
from bert_mlm.errors import UserError

SEGMENTERS = ("auto", "wordpiece", "rjieba", "jieba")
SCHEDULES = ("constant", "linear")
SPANS = ("none", "ngram", "geometric")


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
    # MacBERT / ERNIE mask whole-word n-grams, SpanBERT geometric spans: docs/mask-rate-tuning.md.
    span: Literal[SPANS] = Field(
        "none", description="none | ngram: whole-word n-grams (ngram_probabilities) | geometric: spans of whole words "
                            "of geometric length (SpanBERT); each span shares one 80/10/10 fate, the rate is kept")
    ngram_probabilities: list[Annotated[float, Field(ge=0)]] = Field(
        [0.4, 0.3, 0.2, 0.1], min_length=1, max_length=10,
        description="span: ngram: the probabilities of 1, 2, 3, ... word n-grams (MacBERT's 0.4/0.3/0.2/0.1)")
    geometric_p: Probability = Field(0.2, description="span: geometric: the length's parameter (SpanBERT's 0.2)")
    max_span: int = Field(10, ge=1, le=32, description="span: geometric: the longest span in words (SpanBERT's 10)")

    @model_validator(mode="after")
    def _fractions_and_schedule(self) -> MaskingConfig:
        if self.mask_token_fraction + self.random_token_fraction > 1.0 + 1e-9:
            raise UserError("masking.mask_token_fraction + masking.random_token_fraction = "
                            f"{self.mask_token_fraction + self.random_token_fraction:.3f} must not exceed 1")
        if self.schedule == "linear" and self.final_probability is None:
            raise UserError("masking.final_probability: a linear masking.schedule needs its end value")
        if abs(sum(self.ngram_probabilities) - 1) > 1e-6:
            raise UserError(f"masking.ngram_probabilities: {self.ngram_probabilities} must sum to 1 (they sum to "
                            f"{sum(self.ngram_probabilities):.4g})")
        return self

    @property
    def words(self) -> bool:
        """Whether masking needs word boundaries: whole words, or spans of them."""
        return self.whole_word or self.span != "none"

    @property
    def span_lengths(self) -> tuple[float, ...]:
        """P(a span is 1, 2, ... words long) for ``span``; ``(1.0,)`` without spans."""
        if self.span == "ngram":
            return tuple(self.ngram_probabilities)
        if self.span == "geometric":
            weights = [(1 - self.geometric_p) ** (n - 1) * self.geometric_p for n in range(1, self.max_span + 1)]
            return tuple(weight / sum(weights) for weight in weights)
        return (1.0,)

    def at_step(self, step: int, total_steps: int) -> MaskingConfig:
        """The masking of optimizer step ``step`` (0-based) of ``total_steps``: a pure function of
        the step, so a resumed run masks as the uninterrupted one."""
        if self.schedule == "constant":
            return self
        progress = step / (total_steps - 1) if total_steps > 1 else 1.0
        rate = self.probability + (self.final_probability - self.probability) * min(max(progress, 0.0), 1.0)
        return self.replace(probability=rate, schedule="constant", final_probability=None)
