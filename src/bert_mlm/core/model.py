"""BERT masked language models: construction, continued pretraining, and the masked-only loss."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerBase

from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import IGNORE_INDEX


@dataclass(frozen=True)
class ModelConfig:
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 512
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    attn_implementation: str = "eager"
    init_from: str | None = None

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise UserError(f"model.{name}: {value!r} must be a positive integer")
        if self.hidden_size % self.num_attention_heads:
            raise UserError(
                f"model.hidden_size: {self.hidden_size} is not divisible by "
                f"model.num_attention_heads ({self.num_attention_heads})"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise UserError(f"model.{name}: {getattr(self, name)!r} must be in [0, 1)")
        if self.attn_implementation not in ("eager", "sdpa"):
            raise UserError(f"model.attn_implementation: {self.attn_implementation!r} is not 'eager' or 'sdpa'")


def build_model(config: ModelConfig, tokenizer: PreTrainedTokenizerBase, seed: int) -> BertForMaskedLM:
    """A fresh ``BertForMaskedLM`` sized by ``config`` (vocabulary and padding from the tokenizer),
    or the checkpoint at ``config.init_from`` for continued pretraining."""
    if config.init_from:
        return load_for_continued_pretraining(config.init_from, tokenizer, config.attn_implementation)
    bert_config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        hidden_dropout_prob=config.hidden_dropout_prob,
        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        max_position_embeddings=config.max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        type_vocab_size=2,
        attn_implementation=config.attn_implementation,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForMaskedLM(bert_config)
    return model


def resolve_checkpoint(name: str | os.PathLike) -> str:
    """A local model directory, or a Hugging Face Hub id (``bert-base-chinese``) found in the
    local cache or, when the Hub is reachable, downloaded into it. Offline, a missing checkpoint
    gets one message that says what to do, not a traceback."""
    text = str(name)
    directory = Path(text).expanduser()
    if directory.is_dir():
        if not (directory / "config.json").is_file():
            raise FileNotFoundError(f"model.init_from: {text!r} is not a model directory (no config.json)")
        return str(directory)
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.txt", "*.safetensors", "*.model"]
    try:
        return snapshot_download(text, local_files_only=True, allow_patterns=patterns)
    except Exception as cached_error:  # noqa: BLE001 - not in the cache (or not a valid id): try the Hub
        if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
            raise UserError(_offline_message(text)) from cached_error
    try:
        return snapshot_download(text, allow_patterns=patterns)
    except Exception as error:  # noqa: BLE001 - network, unknown repository, gated model: one message
        raise UserError(f"{_offline_message(text)} ({type(error).__name__}: {str(error).splitlines()[0][:200]})") from error


def _offline_message(name: str) -> str:
    return (
        f"model.init_from: {name!r} is neither a local model directory nor in the Hugging Face cache, and it "
        f"could not be downloaded. Where the Hub is reachable, run `huggingface-cli download {name}` (or set "
        "HF_HOME to a cache that holds it), or give the path of a saved model directory"
    )


def load_for_continued_pretraining(
    path: str | os.PathLike, tokenizer: PreTrainedTokenizerBase, attn_implementation: str = "eager"
) -> BertForMaskedLM:
    directory = resolve_checkpoint(path)
    model = BertForMaskedLM.from_pretrained(directory, attn_implementation=attn_implementation)
    if model.config.vocab_size != len(tokenizer):
        raise UserError(
            f"model.init_from: the checkpoint {str(path)!r} has a vocabulary of "
            f"{model.config.vocab_size} tokens but the tokenizer has {len(tokenizer)}; "
            "leave tokenizer.vocab_path empty to use the checkpoint's own vocabulary"
        )
    if model.config.pad_token_id not in (None, tokenizer.pad_token_id):
        raise UserError(
            f"model.init_from: the checkpoint's pad_token_id {model.config.pad_token_id} differs "
            f"from the tokenizer's {tokenizer.pad_token_id}"
        )
    return model


class MaskedPositionsMLM(torch.nn.Module):
    """Runs a ``BertForMaskedLM`` and its prediction head at the masked positions only.

    ``BertForMaskedLM.forward`` runs the head (a transform plus a decoder over the whole
    vocabulary) at every position although only ~15 % carry a label; on small models that decoder
    is most of the FLOPs. Gathering the masked hidden states first gives the identical loss for a
    fraction of the work. It is a module (not a function) so that ``DistributedDataParallel`` and
    ``torch.compile`` can wrap it; its parameters are the wrapped model's.
    """

    def __init__(self, model: BertForMaskedLM) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        selected = labels != IGNORE_INDEX
        return self.model.cls(hidden[selected]), labels[selected]


def masked_lm_loss(
    mlm: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Summed cross-entropy over the masked tokens, the number of correct top-1 predictions and
    the number of masked tokens. The caller divides by the masked tokens of the whole optimizer
    step, so accumulated micro-batches weigh every masked token equally. A batch without masked
    tokens gives a loss of exactly 0 (not NaN) that still depends on the parameters."""
    logits, targets = mlm(input_ids, attention_mask, labels)
    loss_sum = F.cross_entropy(logits.float(), targets, reduction="sum")
    correct = (logits.argmax(dim=-1) == targets).sum()
    return loss_sum, correct, int(targets.numel())


def training_flops_per_token(config, sequence_length: int, masked_fraction: float) -> float:
    """Matmul FLOPs of one training step (forward + backward) per input token.

    ``config`` is a ``BertConfig`` (or anything with its size attributes). A multiply-add counts
    as 2 FLOPs and backward as twice the forward, the convention of model FLOPs utilisation
    (MFU). Only the useful work counts: the prediction head at the masked positions
    (``masked_fraction`` of the tokens), which is what the loss needs whatever an implementation
    computes. Element-wise work (LayerNorm, GELU, softmax, the optimizer) is not counted.
    """
    hidden, intermediate = config.hidden_size, config.intermediate_size
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * sequence_length * hidden
    head = 2 * (hidden * hidden + hidden * config.vocab_size)
    forward = config.num_hidden_layers * per_layer + masked_fraction * head
    return 3.0 * forward
