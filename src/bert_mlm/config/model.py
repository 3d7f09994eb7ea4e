"""``model``: the BERT encoder's shape, or the checkpoint continued pretraining starts from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError


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
    initializer_range: float = Field(
        0.02, gt=0, lt=1, description="standard deviation of the initial weights (from scratch; BERT's 0.02)")
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
        return self
