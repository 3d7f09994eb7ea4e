"""``model``: the BERT encoder's shape, or the checkpoint continued pretraining starts from."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError

AUTO = "auto"
# auto's initial weights, by width (BENCHMARKS.md, "Time to quality"): local initialisation with this
# standard deviation up to each width, BERT's draw at 0.02 above the last (measured at 128 and 256 only).
LOCAL_RANGES, BERT_RANGE = ((128, 0.05), (256, 0.03)), 0.02


class ModelConfig(Section):
    """The BERT encoder: its shape, or the checkpoint that continued pretraining starts from"""

    SECTION = "model"

    hidden_size: int = Field(128, gt=0, description="width of the hidden states (a multiple of num_attention_heads)")
    num_hidden_layers: int = Field(2, gt=0, description="transformer layers")
    num_attention_heads: int = Field(2, gt=0, description="attention heads per layer")
    intermediate_size: int = Field(512, gt=0, description="width of the feed-forward layers")
    hidden_dropout_prob: float = Field(
        0.0, ge=0, lt=1, description="no dropout: short runs on small corpora underfit, they do not overfit")
    attention_probs_dropout_prob: float = Field(0.0, ge=0, lt=1, description="dropout on the attention weights")
    initializer_range: Annotated[float, Field(gt=0, lt=1)] | Literal["auto"] = Field(
        AUTO, description="standard deviation of the initial weights (from scratch); auto: for local initialisation "
                          "0.05 up to width 128 and 0.03 up to 256, else BERT's 0.02")
    initialisation: Literal["auto", "local", "bert"] = Field(
        AUTO, description="from scratch: local (the first layer's heads start on the next and the previous token) | "
                          "bert (BERT's normal draw only) | auto: local up to model.hidden_size 256, bert above "
                          "(measured: docs/training.md)")
    max_position_embeddings: int = Field(512, gt=0, description="the longest sequence the model can read")
    attn_implementation: Literal["eager", "sdpa"] = Field(
        "eager", description="eager | sdpa (fused attention kernels, faster on GPUs)")
    init_from: str | None = Field(
        None, description="continued pretraining: a Hugging Face model id (bert-base-chinese) or a model directory; "
                          "its tokenizer comes with it")

    @model_validator(mode="after")
    def _heads_divide_the_width(self) -> ModelConfig:
        if self.hidden_size % self.num_attention_heads:
            raise UserError(f"model.hidden_size: {self.hidden_size} is not divisible by "
                            f"model.num_attention_heads ({self.num_attention_heads})")
        if self.resolved().initialisation == "local" and self.hidden_size // self.num_attention_heads % 2:
            raise UserError(f"model.initialisation: local needs an even head width, and model.hidden_size / "
                            f"model.num_attention_heads is {self.hidden_size // self.num_attention_heads}; "
                            "change either, or set model.initialisation=bert")
        return self

    def resolved(self) -> ModelConfig:
        """This configuration with ``auto`` initial weights decided: local initialisation at 0.05 up to width 128
        (2 x 128 left the unigram plateau in both languages) and at 0.03 up to 256 (4 x 256, at half the auto
        learning rate: config/training.py), BERT's draw at 0.02 above (not measured there: BERT's own)."""
        local_range = next((spread for width, spread in LOCAL_RANGES if self.hidden_size <= width), None)
        scheme = self.initialisation if self.initialisation != AUTO else "local" if local_range else "bert"
        spread = self.initializer_range if self.initializer_range != AUTO else (
            local_range if scheme == "local" and local_range else BERT_RANGE)
        return self.model_copy(update={"initialisation": scheme, "initializer_range": spread})

    def starts_locally(self) -> bool:
        """Whether the model trains from local initialisation (from scratch, ``auto`` resolved): the
        ``auto`` learning rate depends on it (config/training.py)."""
        return not self.init_from and self.resolved().initialisation == "local"
