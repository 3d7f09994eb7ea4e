"""Fill-mask examples: the model's top fills of sentences with a ``[MASK]``, with the plain
``transformers`` pipeline; the user's sentences, or held-out sentences with one word masked and
the true word beside the fills (what the report, the model card and ``bert-mlm fill-mask`` show)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

import numpy as np
from transformers import BertForMaskedLM, PreTrainedTokenizerBase, pipeline

from bert_mlm.core.common.text import cjk_characters, readable_spacing
from bert_mlm.errors import UserError


def fill_mask_examples(model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, sentences: Sequence[str],
                       top_k: int = 5, answers: Sequence[str] | None = None,
                       parameter: str = "evaluation.fill_mask_sentences") -> list[dict]:
    """Top-k fills of each sentence's ``[MASK]`` (``per_mask`` too where it has several; ``predictions``
    holds the first's); with ``answers`` (the masked-out words), where the true word ranks.
    ``parameter`` names where the sentences came from in errors."""
    if not sentences:
        return []
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=next(model.parameters()).device)
    examples, positions = [], model.config.max_position_embeddings
    for position, sentence in enumerate(sentences):
        if tokenizer.mask_token not in sentence:
            raise UserError(f"{parameter}: {sentence!r} has no {tokenizer.mask_token}")
        if (length := len(tokenizer(sentence)["input_ids"])) > positions:
            raise UserError(f"{parameter}: {sentence[:60]!r}... is {length} tokens; the model reads at most "
                            f"{positions} (model.max_position_embeddings)")
        predictions = fill(sentence, top_k=top_k)
        per_mask = [[{"token": p["token_str"], "score": round(float(p["score"]), 4)} for p in fills]
                    for fills in (predictions if predictions and isinstance(predictions[0], list) else [predictions])]
        example = {"sentence": sentence, "predictions": per_mask[0]}
        if len(per_mask) > 1:
            example["per_mask"] = per_mask
        if answers is not None:
            predicted = [_comparable(p["token"], tokenizer) for p in example["predictions"]]
            truth = _comparable(answers[position], tokenizer)
            example.update(answer=answers[position],
                           answer_rank=predicted.index(truth) + 1 if truth in predicted else None)
        examples.append(example)
    return examples


def fill_mask_report(model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, sentences: Sequence[str] | None,
                     held_out_texts: Iterable[str], count: int, seed: int, top_k: int = 5) -> list[dict]:
    """Fill-mask examples: the user's ``sentences`` when given, else ``count`` held-out sentences
    with one word masked, each with the true word and its rank among the fills."""
    if sentences:
        return fill_mask_examples(model, tokenizer, sentences, top_k)
    sentences, answers = fill_mask_sentences_from(held_out_texts, tokenizer, count=count, seed=seed,
                                                  max_tokens=model.config.max_position_embeddings)
    return fill_mask_examples(model, tokenizer, sentences, top_k, answers)


def _comparable(word: str, tokenizer: PreTrainedTokenizerBase) -> str:
    return word.replace(" ", "").lower() if getattr(tokenizer, "do_lower_case", False) else word.replace(" ", "")


_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")


def fill_mask_sentences_from(texts: Iterable[str], tokenizer: PreTrainedTokenizerBase, count: int = 3, seed: int = 0,
                             min_chars: int = 8, max_chars: int = 160, max_candidates: int = 2000,
                             max_tokens: int | None = None) -> tuple[list[str], list[str]]:
    """``count`` sentences of ``texts`` (held-out documents) with one word masked, and the true
    words. A masked word is one whole token (a single-piece word, or one CJK character) made of
    letters, so that one ``[MASK]`` can be filled with it. Drawn from the first ``max_candidates``
    sentences with ``seed``. A sentence longer than ``max_tokens`` (the model's positions) is no
    candidate (a vocabulary that splits text finely made a 69-token example for a model of 64
    positions, which failed after training)."""
    candidates: list[tuple[str, list[tuple[int, int]]]] = []
    for sentence in itertools.chain.from_iterable(map(_SENTENCE_END.split, texts)):
        sentence = readable_spacing(" ".join(sentence.split()), tuple(tokenizer.all_special_tokens))
        if not min_chars <= len(sentence) <= max_chars:
            continue
        encoding = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)
        tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
        spans = [
            (start, end)
            for k, ((start, end), token) in enumerate(zip(encoding["offset_mapping"], tokens, strict=True))
            if token not in tokenizer.all_special_tokens
            and not token.startswith("##")
            and not (k + 1 < len(tokens) and tokens[k + 1].startswith("##"))
            and sentence[start:end].isalpha()
            and (len(sentence[start:end]) >= 3 or cjk_characters(sentence[start:end]))
        ]
        if spans and (max_tokens is None or len(tokens) + 2 <= max_tokens):
            candidates.append((sentence, spans))
        if len(candidates) >= max_candidates:
            break
    rng = np.random.default_rng(seed)
    sentences, answers = [], []
    for choice in sorted(rng.choice(len(candidates), size=min(count, len(candidates)), replace=False)):
        sentence, spans = candidates[choice]
        start, end = spans[int(rng.integers(len(spans)))]
        sentences.append(f"{sentence[:start]}{tokenizer.mask_token}{sentence[end:]}")
        answers.append(sentence[start:end])
    return sentences, answers
