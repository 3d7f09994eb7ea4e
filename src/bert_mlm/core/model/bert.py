"""BERT masked language models: construction, continued pretraining, and the masked-only loss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerBase

from bert_mlm.config import ModelConfig
from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.core.model.initialisation import initialise_locally
from bert_mlm.core.model.masking import IGNORE_INDEX
from bert_mlm.core.model.model_files import check_model_directory, check_weights
from bert_mlm.errors import UserError, first_line


def build_model(config: ModelConfig, tokenizer: PreTrainedTokenizerBase, seed: int) -> BertForMaskedLM:
    """A fresh ``BertForMaskedLM`` sized by ``config`` (vocabulary and padding from the tokenizer),
    or the checkpoint at ``config.init_from`` for continued pretraining."""
    if config.init_from:
        return load_for_continued_pretraining(config.init_from, tokenizer, config.attn_implementation)
    config = config.resolved()
    with torch.random.fork_rng(devices=[]), MODEL_LOCK:
        torch.manual_seed(seed)
        model = BertForMaskedLM(bert_config(config, len(tokenizer), pad_token_id=tokenizer.pad_token_id))
    if config.initialisation == "local":
        initialise_locally(model)
    return model


def bert_config(config: ModelConfig, vocab_size: int, **settings) -> BertConfig:
    """``model.*`` as a ``BertConfig`` of ``vocab_size`` tokens (and any other ``settings``)."""
    config = config.resolved()
    shape = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings",
             "hidden_dropout_prob", "attention_probs_dropout_prob", "attn_implementation", "initializer_range")
    return BertConfig(vocab_size=vocab_size, type_vocab_size=2, **{name: getattr(config, name) for name in shape},
                      **settings)


def _looks_like_a_path(text: str, path: Path) -> bool:
    """A path, not a Hub id: written as one, or present in part (``data/06_models/x`` where
    ``data`` exists; a Hub id is ``name`` or ``owner/name``)."""
    parts = Path(text).parts
    return (text.startswith(("/", "./", "../", "~")) or path.exists() or len(parts) > 2
            or (len(parts) == 2 and Path(parts[0]).exists()))


def resolve_checkpoint(name: str | os.PathLike, what: str = "model.init_from") -> str:
    """A local model directory, or a Hub id (``bert-base-chinese``) from the local cache or, when the
    Hub is reachable, downloaded into it. Offline, a missing checkpoint is one line saying what to do;
    a path gets one saying what is missing there (never "download it")."""
    text = str(name)
    if _looks_like_a_path(text, Path(text).expanduser()):
        return str(check_model_directory(text, what))
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.txt", "*.safetensors", "*.model"]
    try:
        return snapshot_download(text, local_files_only=True, allow_patterns=patterns)
    except Exception as cached_error:  # noqa: BLE001 - not in the cache (or not a valid id): try the Hub
        if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
            raise UserError(_offline_message(text, what)) from cached_error
    try:
        return snapshot_download(text, allow_patterns=patterns)
    except Exception as error:  # noqa: BLE001 - network, unknown repository, gated model: one message
        raise UserError(f"{_offline_message(text, what)} ({type(error).__name__}: {first_line(error)})") from error


def open_model(name: str | os.PathLike, what: str = "model.init_from") -> str:
    """The resolved directory of the model at ``name`` (a directory or a Hub id), its files checked
    without loading the weights (:func:`~bert_mlm.core.model.model_files.check_weights`)."""
    directory = Path(resolve_checkpoint(name, what))
    check_weights(directory, what)
    return str(directory)


def _offline_message(name: str, what: str = "model.init_from") -> str:
    return (f"{what}: {name!r} is neither a local model directory nor in the Hugging Face cache, and it could not be "
            f"downloaded. Where the Hub is reachable, run `huggingface-cli download {name}` (or set HF_HOME to a cache "
            "that holds it), or give the path of a saved model directory")


def check_starting_vocabulary(init_from: str, vocab_path: str, lowercase: bool = True,
                              strip_accents: bool | None = None, chinese_chars: bool = True) -> None:
    """``model.init_from`` with ``tokenizer.vocab_path``: a vocabulary other than the model's own
    (other tokens at the same ids, or another size) would train on meaningless embeddings: refused."""
    from bert_mlm.core.tokens.tokenizer import load_tokenizer

    directory = Path(resolve_checkpoint(init_from))
    given = load_tokenizer(vocab_path, lowercase, strip_accents, chinese_chars).get_vocab()
    own = starting_vocabulary(directory)  # None: saved without its tokenizer, only its size can be compared
    advice = ("the starting model's own tokenizer is used when tokenizer.vocab_path is empty: leave it empty, "
              "or start from a model trained with that vocabulary")
    if own is not None and own != given:
        same = sum(own.get(token) == index for token, index in given.items())
        raise UserError(f"tokenizer.vocab_path: {vocab_path!r} is not the vocabulary of model.init_from {init_from!r} "
                        f"({len(given)} vs {len(own)} tokens; {same} ids mean the same token in both); {advice}")
    size = json.loads((directory / "config.json").read_text()).get("vocab_size")
    if size != len(given):
        raise UserError(f"tokenizer.vocab_path: {vocab_path!r} has {len(given)} tokens but model.init_from "
                        f"{init_from!r} has a vocabulary of {size}; {advice}")


def check_starting_tokenizer(init_from: str, lowercase: bool = True, strip_accents: bool | None = None,
                             chinese_chars: bool = True) -> None:
    """``model.init_from`` without ``tokenizer.vocab_path``: the model's own tokenizer must load and
    match its vocabulary size (checked now: the tokenization node reads it after ingestion)."""
    from bert_mlm.core.tokens.tokenizer import VocabularyError, load_tokenizer

    directory = resolve_checkpoint(init_from)
    try:
        tokenizer = load_tokenizer(directory, lowercase, strip_accents, chinese_chars)
    except VocabularyError as error:
        raise UserError(f"model.init_from: {directory!r} has no usable tokenizer ({error}); give the model's "
                        "vocabulary as tokenizer.vocab_path") from error
    except Exception as error:  # noqa: BLE001 - tokenizers' Rust parser raises a bare Exception
        raise UserError(f"model.init_from: the tokenizer files of {directory!r} are unreadable ({first_line(error)}); "
                        "restore them, or give the model's vocabulary as tokenizer.vocab_path") from error
    size = json.loads((Path(directory) / "config.json").read_text()).get("vocab_size")
    if size is not None and size != len(tokenizer):
        raise UserError(f"model.init_from: {directory!r} has a tokenizer of {len(tokenizer)} tokens but a model "
                        f"vocabulary of {size}; they were not saved together")


def load_for_continued_pretraining(path: str | os.PathLike, tokenizer: PreTrainedTokenizerBase,
                                   attn_implementation: str = "eager") -> BertForMaskedLM:
    """The checkpoint at ``path`` for ``tokenizer``: its own vocabulary, or an extension of it
    (``tokenizer.extend_vocabulary``), for which the embeddings grow
    (:func:`bert_mlm.core.tokens.vocabulary.grow_embeddings`); any other vocabulary is refused."""
    from bert_mlm.core.tokens.vocabulary import grow_embeddings

    directory = resolve_checkpoint(path)
    with MODEL_LOCK:
        model = BertForMaskedLM.from_pretrained(directory, attn_implementation=attn_implementation)
    size = model.config.vocab_size
    own_vocabulary = "leave tokenizer.vocab_path empty to use the checkpoint's own vocabulary"
    if len(tokenizer) < size:
        raise UserError(f"model.init_from: the checkpoint {str(path)!r} has a vocabulary of {size} tokens but the "
                        f"tokenizer has {len(tokenizer)}; {own_vocabulary}")
    own = starting_vocabulary(directory)
    inherited = {token: index for token, index in tokenizer.get_vocab().items() if index < size}
    if own is not None and inherited != own:
        same = sum(own.get(token) == index for token, index in inherited.items())
        raise UserError(f"model.init_from: the tokenizer ({len(tokenizer)} tokens) is neither the vocabulary of the "
                        f"checkpoint {str(path)!r} ({size} tokens) nor an extension of it ({same} of its {size} ids "
                        f"mean the same token); {own_vocabulary}")
    if model.config.pad_token_id not in (None, tokenizer.pad_token_id):
        raise UserError(f"model.init_from: the checkpoint's pad_token_id {model.config.pad_token_id} differs from the "
                        f"tokenizer's {tokenizer.pad_token_id}")
    grow_embeddings(model, tokenizer)
    return model


def starting_vocabulary(directory: str | os.PathLike) -> dict[str, int] | None:
    """The vocabulary saved with a checkpoint, or None for a checkpoint saved without a tokenizer."""
    from bert_mlm.core.tokens.tokenizer import VocabularyError, load_tokenizer

    try:
        return load_tokenizer(directory).get_vocab()
    except VocabularyError:
        return None


class MaskedPositionsMLM(torch.nn.Module):
    """A ``BertForMaskedLM`` with its prediction head run at the masked positions only.

    ``BertForMaskedLM.forward`` runs the head (a decoder over the whole vocabulary, most of a small
    model's FLOPs) at every position although only ~15 % carry a label; gathering the masked hidden
    states first gives the same loss for a fraction of the work. A module so that
    ``DistributedDataParallel`` and ``torch.compile`` can wrap it.
    """

    def __init__(self, model: BertForMaskedLM) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions``: the flat indices of the masked tokens, when the caller knows them (found
        on the host before the copy): a boolean mask on the device needs a host sync for its size."""
        hidden = self.model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if positions is None:
            selected = labels != IGNORE_INDEX
            return self.model.cls(hidden[selected]), labels[selected]
        selected_hidden = hidden.flatten(0, 1).index_select(0, positions)
        return self.model.cls(selected_hidden), labels.flatten().index_select(0, positions)


def masked_lm_loss(mlm: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                   positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Summed cross-entropy over the masked tokens, correct top-1 predictions and masked tokens. The
    caller divides by the whole step's masked tokens, so that every masked token weighs the same; a
    batch without any gives a loss of 0 (not NaN) that still depends on the parameters."""
    logits, targets = mlm(input_ids, attention_mask, labels, positions)
    loss_sum = F.cross_entropy(logits.float(), targets, reduction="sum")
    correct = (logits.argmax(dim=-1) == targets).sum()
    return loss_sum, correct, int(targets.numel())


def training_flops_per_token(config, sequence_length: int, masked_fraction: float) -> float:
    """Matmul FLOPs of one training step (forward + backward) per input token, for a ``BertConfig``.

    MFU's convention: a multiply-add is 2 FLOPs, backward twice the forward, and only the useful
    work counts (the head at the ``masked_fraction`` of masked positions, whatever an implementation
    computes; no element-wise work).
    """
    hidden, intermediate = config.hidden_size, config.intermediate_size
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * sequence_length * hidden
    head = 2 * (hidden * hidden + hidden * config.vocab_size)
    forward = config.num_hidden_layers * per_layer + masked_fraction * head
    return 3.0 * forward


def available_memory(device: torch.device) -> tuple[int, str]:
    """Bytes this step may use and where: free GPU memory, or the RAM the kernel calls available."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0], f"free memory of {device}"
    import psutil  # dask.distributed's dependency: MemAvailable on Linux, its counterpart on macOS and Windows

    return psutil.virtual_memory().available, "available RAM"


def step_estimate(config, batch_size: int, length: int, precision: str = "fp32", processes: int = 1) -> int:
    """A rough upper estimate of the memory one training step of ``batch_size`` sequences of
    ``length`` tokens takes (all ``processes`` together; ``config`` is a ``BertConfig``): fp32
    weights, gradients and AdamW's two moments (16 bytes a parameter), and the activations kept for
    backward. Eager attention keeps the scores, their softmax, its dropout mask and output per
    layer: B x heads x L^2 each, quadratic in the length (SDPA holds one such matrix at a time)."""
    hidden, layers, intermediate = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    parameters = ((config.vocab_size + config.max_position_embeddings + 2) * hidden
                  + layers * (4 * hidden * hidden + 2 * hidden * intermediate))
    tokens = batch_size * length
    linear = layers * tokens * (16 * hidden + 3 * intermediate)  # inputs of every matmul, norms, GELU
    eager_attention = getattr(config, "_attn_implementation", "eager") != "sdpa"
    attention = batch_size * config.num_attention_heads * length * length * (4 * layers if eager_attention else 1)
    head = int(0.15 * tokens) * config.vocab_size * 2  # logits and their gradient at the masked positions
    activation_bytes = 2 if precision in ("fp16", "bf16") else 4
    return processes * (16 * parameters + activation_bytes * (linear + attention + head))


def check_step_memory(config, batch_size: int, length: int, device: torch.device, precision: str = "fp32",
                      processes: int = 1, sequences: int | None = None) -> int:
    """Refuse, in one line, a training step that cannot fit (instead of the kernel's OOM killer,
    rc 137 and no message); ``config`` is a ``BertConfig``. A step holds at most the split's
    ``sequences`` (when known), whatever ``batch_size`` says. Returns the estimate."""
    batch = min(batch_size, sequences) if sequences else batch_size
    estimate = step_estimate(config, batch, length, precision, processes)
    available, where = available_memory(device)
    if estimate > available:
        raise _step_too_large(batch, batch_size, length, estimate, available, where)
    return estimate


def _step_too_large(batch: int, batch_size: int, length: int, estimate: int, available: int, where: str) -> UserError:
    held = (f"{batch} sequences (all of the train split; training.batch_size={batch_size})"
            if batch < batch_size else f"training.batch_size={batch_size} sequences")
    return UserError(f"sequences.max_length: one training step of {held} of {length} tokens needs about "
                     f"{estimate / 1e9:,.1f} GB (attention grows with the square of the length) but only "
                     f"{available / 1e9:,.1f} GB is left ({where}); lower sequences.max_length or training.batch_size")


def check_step_memory_early(config, batch_size: int, length: int, device: torch.device, precision: str = "fp32",
                            processes: int = 1) -> str | None:
    """:func:`check_step_memory` before the training sequences are counted: a step that cannot fit
    even one sequence is refused now; one that fits fewer than ``training.batch_size`` is left to
    the check once they are counted (a step holds at most the split: 748 sequences of the smoke
    corpus at batch_size=100000), and the returned warning says so. None when the step fits."""
    estimate = step_estimate(config, batch_size, length, precision, processes)
    available, where = available_memory(device)
    if estimate <= available:
        return None
    if step_estimate(config, 1, length, precision, processes) > available:  # not even one sequence fits
        raise _step_too_large(batch_size, batch_size, length, estimate, available, where)
    return (f"training.batch_size={batch_size}: a step of that many sequences of {length} tokens would need about "
            f"{estimate / 1e9:,.1f} GB but {available / 1e9:,.1f} GB is left ({where}); a step holds at most the "
            "train split's sequences, so this is checked again once they are counted, before training")


def planned_bert_config(config: ModelConfig, vocab_size: int, added_tokens: int = 0) -> BertConfig:
    """The shape the run will train, known before any data: the ``init_from`` checkpoint's (with
    up to ``added_tokens`` more rows: ``tokenizer.extend_vocabulary``), or ``model.*`` with the
    planned ``tokenizer.vocab_size``."""
    if not config.init_from:
        return bert_config(config, vocab_size)
    planned = BertConfig.from_pretrained(resolve_checkpoint(config.init_from))
    planned.vocab_size += added_tokens
    return planned
