"""``evaluation``: the fixed protocol that makes runs (and tuning trials) comparable, and what the
evaluation node reports beside it."""

from __future__ import annotations

from pydantic import Field

from bert_mlm.config.base import Probability, Section


class EvaluationConfig(Section):
    """The fixed evaluation protocol: the same masks for every model evaluated on the same data"""

    SECTION = "evaluation"

    mask_probability: Probability = Field(0.15, description="the protocol's mask rate, whatever a model trained with")
    seed: int = Field(20231, ge=0, description="the protocol's masks and the order of the held-out sequences")
    batch_size: int = Field(128, gt=0, description="larger than training's: no gradients, no optimizer state")
    max_sequences: int | None = Field(None, gt=0, description="evaluate at most this many sequences (null: all)")
    whole_word: bool = Field(False, description="true: the whole-word protocol (whole words selected, every piece "
                                                "scored)")
    mask_draws: int = Field(
        8, ge=1, description="at most this many independent fixed mask draws per held-out sequence (small test "
                             "splits: more masked tokens)")
    min_masked_tokens: int | None = Field(
        20_000, ge=1, description="stop once this many masked tokens are scored (whole blocks of 256 sequences); "
                                  "null: every draw")


class EvaluationParameters(EvaluationConfig):
    """The fixed evaluation protocol, and what the evaluation node reports beside it"""

    corpus_path: str | None = Field(
        None, description="an extra held-out corpus to evaluate on (read by the catalog's extra_eval_corpus), e.g. "
                          "../shared/corpora/wikitext-2-raw/wiki.valid.raw")
    fill_mask_sentences: list[str] | None = Field(
        None, description="null: test-split sentences with one word masked, shown with the true word; or a list of "
                          "\"... [MASK] ...\" sentences")
    fill_mask_count: int = Field(
        3, ge=0, description="how many test-split sentences (when fill_mask_sentences is null)")
    top_k: int = Field(5, ge=1, description="fills shown per [MASK]")

    @property
    def protocol(self) -> EvaluationConfig:
        """Only the protocol's fields: what study fingerprints and evaluation sets are built from."""
        return EvaluationConfig.model_construct(**{name: getattr(self, name) for name in EvaluationConfig.model_fields})
