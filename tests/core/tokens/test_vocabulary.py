"""An inherited vocabulary's coverage of the training text, its extension, and the grown model."""

from __future__ import annotations

import logging
from collections import Counter

import pandas as pd
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertForMaskedLM, pipeline

from bert_mlm.config import ModelConfig, TokenizerConfig
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.tokens.tokenizer import load_tokenizer, train_wordpiece
from bert_mlm.core.tokens.vocabulary import (
    adapt_vocabulary,
    extend_tokenizer,
    extension_tokens,
    measure_coverage,
    missing_forms,
    wordpiece_ids,
)
from bert_mlm.errors import UserError
from tests.core.conftest import synthetic_sentences

TINY = ModelConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                   max_position_embeddings=64)
# A hand-made vocabulary: every split below is known by construction.
HAND_MADE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "##a", "##b", "##c", "ab", "##bc"]


def batches(texts: list[str], size: int = 500):
    return lambda: (texts[start : start + size] for start in range(0, len(texts), size))


def save_starting_model(directory, tokenizer, seed: int = 0, tied: bool = True):
    """A tiny BertForMaskedLM for ``tokenizer``, saved with it (decoder biases, and an untied
    decoder's rows, made distinct)."""
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, pad_token_id=0, tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = BertForMaskedLM(config)
    with torch.no_grad():
        model.cls.predictions.decoder.bias.copy_(torch.randn(len(tokenizer)))  # tied: cls.predictions.bias too
        if not tied:
            model.cls.predictions.decoder.weight.copy_(0.02 * torch.randn(len(tokenizer), 16))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model


@pytest.fixture
def hand_made(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(HAND_MADE) + "\n", encoding="utf-8")
    return load_tokenizer(tmp_path / "vocab.txt")


# ----------------------------------------------------------------------------- the grown model
@pytest.mark.parametrize("tied", [True, False], ids=["tied decoder", "untied decoder"])
def test_new_rows_are_the_exact_mean_of_the_old_pieces_rows(hand_made, tmp_path, tied):
    start = save_starting_model(tmp_path / "start", hand_made, tied=tied)
    extended = extend_tokenizer(hand_made, ["abc", "##abc", "cab", "中"], TokenizerConfig())
    assert [extended.convert_tokens_to_ids(t) for t in ("abc", "##abc", "cab", "中")] == [13, 14, 15, 16]
    grown = build_model(TINY.replace(init_from=str(tmp_path / "start")), extended, seed=0)

    old_rows = start.bert.embeddings.word_embeddings.weight.detach()
    old_decoder = start.cls.predictions.decoder.weight.detach()
    old_bias = start.cls.predictions.decoder.bias.detach()
    ids = {token: HAND_MADE.index(token) for token in HAND_MADE}
    expected = {  # under the old vocabulary: abc = ab ##c, ##abc = ##a ##bc, cab = c ##a ##b, 中 = [UNK]
        13: [ids["ab"], ids["##c"]], 14: [ids["##a"], ids["##bc"]], 15: [ids["c"], ids["##a"], ids["##b"]],
        16: list(range(len(HAND_MADE))),  # [UNK]: the mean of every old row
    }
    rows = grown.bert.embeddings.word_embeddings.weight.detach()
    decoder = grown.cls.predictions.decoder.weight.detach()
    bias = grown.cls.predictions.decoder.bias.detach()
    assert rows.shape == decoder.shape == (17, 16) and grown.config.vocab_size == 17
    assert torch.equal(rows[:13], old_rows) and torch.equal(bias[:13], old_bias)  # the old rows are untouched
    for index, pieces in expected.items():
        assert torch.allclose(rows[index], old_rows[pieces].mean(dim=0), atol=0, rtol=1e-6), index
        assert torch.allclose(decoder[index], old_decoder[pieces].mean(dim=0), atol=0, rtol=1e-6), index
        assert torch.allclose(bias[index], old_bias[pieces].mean(), atol=0, rtol=1e-6), index
    # BertForMaskedLM ties the decoder to the word embeddings (it grew with them), unless told not to.
    assert (decoder.data_ptr() == rows.data_ptr()) == tied and tied == torch.equal(old_rows, old_decoder)
    if tied:  # its output-only bias is the decoder's
        assert grown.cls.predictions.bias.data_ptr() == grown.cls.predictions.decoder.bias.data_ptr()
    # A function of the checkpoint and the tokenizer: no random draw, whatever the seed.
    again = build_model(TINY.replace(init_from=str(tmp_path / "start")), extended, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(grown.state_dict().values(), again.state_dict().values(), strict=True))


def test_wordpiece_ids_split_whole_words_as_the_library_does(tiny_tokenizer):
    vocab, unk = tiny_tokenizer.get_vocab(), tiny_tokenizer.unk_token_id
    model = tiny_tokenizer.backend_tokenizer.model
    words = {w.lower().strip(".,!?") for s in synthetic_sentences(200, seed=3) for w in s.split()}
    words |= {"functional", "dictionaries", "zzzq", "é", "tokenization", "x" * 101}
    for word in sorted(words):
        assert wordpiece_ids(word, vocab, unk) == [t.id for t in model.tokenize(word)], word


def test_a_foreign_vocabulary_is_refused_and_an_extension_accepted(tiny_tokenizer, tmp_path):
    save_starting_model(tmp_path / "start", tiny_tokenizer)
    config = TINY.replace(init_from=str(tmp_path / "start"))
    # The same size, other tokens at the same ids: refused (it would train on meaningless rows).
    vocab = sorted(tiny_tokenizer.get_vocab(), key=tiny_tokenizer.get_vocab().get)
    swapped = vocab[:5] + vocab[6:7] + vocab[5:6] + vocab[7:]
    (tmp_path / "swapped.txt").write_text("\n".join(swapped) + "\n", encoding="utf-8")
    size = len(tiny_tokenizer)
    with pytest.raises(UserError, match=rf"model\.init_from: the tokenizer \({size} tokens\) is neither the vocabulary "
                                        rf"of the checkpoint .* nor an extension of it \({size - 2} of its {size} ids"):
        build_model(config, load_tokenizer(tmp_path / "swapped.txt"), seed=0)
    # An extension of that foreign vocabulary is refused too; one of the checkpoint's own grows it.
    with pytest.raises(UserError, match="nor an extension of it"):
        build_model(config, extend_tokenizer(load_tokenizer(tmp_path / "swapped.txt"), ["zz"], TokenizerConfig()), 0)
    grown = build_model(config, extend_tokenizer(tiny_tokenizer, ["zz"], TokenizerConfig()), 0)
    assert grown.config.vocab_size == size + 1


# ----------------------------------------------------------------------------- coverage and extension, Chinese
@pytest.fixture(scope="module")
def news_and_reviews(shared_dir):
    """A vocabulary trained on 6,000 sentences of Chinese news, and 1,500 hotel reviews: the news
    lacks characters the reviews use (哦, 嘿, 惬, 褥, ...)."""
    news = (shared_dir / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()[:6000]
    reviews = pd.read_csv(shared_dir / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    return train_wordpiece(news, TokenizerConfig(vocab_size=8000)), reviews["review"].astype(str).tolist()[:1500]


def test_chinese_reviews_under_a_news_vocabulary_are_covered_after_adding_characters(news_and_reviews, caplog):
    news, reviews = news_and_reviews
    coverage = measure_coverage(news, batches(reviews)())
    caplog.set_level(logging.INFO)
    tokenizer, report = adapt_vocabulary(news, batches(reviews), TokenizerConfig(), "news")
    assert tokenizer is news and report.unknown_rate == coverage.rate > 0.005 and report.added_tokens == 0
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    top = report.uncovered_characters[0][0]
    assert "above tokenizer.unk_warning_rate=0.10%" in warning and repr(top) in warning
    assert f"Set tokenizer.extend_vocabulary={len(coverage.missing)} " in warning

    caplog.clear()
    extended, report = adapt_vocabulary(news, batches(reviews), TokenizerConfig(extend_vocabulary=5000), "news")
    assert report.unknown_rate_after < 0.001 and not any(r.levelno == logging.WARNING for r in caplog.records)
    assert report.added[0] == top and len(report.added) == report.added_tokens == len(extended) - len(news)
    assert all(len(token) == 1 for token in report.added if "\u4e00" <= token[-1] <= "\u9fff")  # characters, no ##
    counts = coverage.missing
    assert [counts[t] for t in report.added] == sorted((counts[t] for t in report.added), reverse=True)
    assert {t: i for t, i in extended.get_vocab().items() if i < len(news)} == news.get_vocab()
    # A budget below what is missing takes the commonest (Chinese: characters only, no pieces).
    assert extension_tokens(coverage, 5, chinese=True, pieces=lambda: Counter({"x": 1})) == report.added[:5]


def test_a_grown_chinese_model_saves_and_fills_masks_in_plain_transformers(news_and_reviews, tmp_path):
    news, reviews = news_and_reviews
    save_starting_model(tmp_path / "start", news)
    extended, report = adapt_vocabulary(news, batches(reviews), TokenizerConfig(extend_vocabulary=50), "news")
    grown = build_model(TINY.replace(init_from=str(tmp_path / "start")), extended, seed=0)
    grown.save_pretrained(tmp_path / "grown")
    extended.save_pretrained(tmp_path / "grown")
    new = report.added[0]
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "grown")
    pieces = tokenizer.convert_ids_to_tokens(tokenizer(f"房间{new}很好")["input_ids"])
    assert pieces[1:-1] == ["房", "间", new, "很", "好"]
    assert AutoModelForMaskedLM.from_pretrained(tmp_path / "grown").config.vocab_size == len(news) + 50
    fills = pipeline("fill-mask", model=str(tmp_path / "grown"))(f"房间{new}[MASK]好")
    assert len(fills) == 5 and all(new in fill["sequence"].replace(" ", "") for fill in fills)


# ----------------------------------------------------------------------------- coverage and extension, English
def test_english_missing_characters_come_first_then_pieces_learned_on_the_domain(tiny_tokenizer, caplog):
    # The tiny vocabulary holds the synthetic sentences' letters only: no digits, no "ø" or "æ".
    domain = [f"{s} Smørrebrød and æbleskiver at the Ærø café; table {n}." for n, s in
              enumerate(synthetic_sentences(400, seed=9))]
    caplog.set_level(logging.WARNING)
    missing = measure_coverage(tiny_tokenizer, batches(domain)()).missing
    _, measured = adapt_vocabulary(tiny_tokenizer, batches(domain), TokenizerConfig(), "tiny")
    assert measured.unknown_rate > 0.05 and "'smørrebrød' x400" in caplog.text  # the words are named too
    assert {"##ø", "æ", ";"} <= set(missing) and "'##ø' x800" in caplog.text  # [UNK] tokens it caused

    extended, report = adapt_vocabulary(tiny_tokenizer, batches(domain), TokenizerConfig(extend_vocabulary=200), "tiny")
    assert report.added[: len(missing)] == sorted(missing, key=lambda form: (-missing[form], form))
    pieces = report.added[len(missing):]
    assert len(missing) < len(report.added) < 200 and report.unknown_rate_after == 0.0  # all there is
    assert not set(pieces) & set(tiny_tokenizer.get_vocab())  # pieces the old vocabulary lacks
    assert {"smørrebrød", "æbleskiver", "cafe"} & set(pieces)  # whole domain words among them
    # Deterministic: the same text gives the same extension.
    again = adapt_vocabulary(tiny_tokenizer, batches(domain), TokenizerConfig(extend_vocabulary=200), "tiny")[1]
    assert again.added == report.added
    assert extended("Ærø; 42 smørrebrød")["input_ids"].count(extended.unk_token_id) == 0


def test_missing_forms_name_the_word_start_and_continuations():
    vocab = {"a": 0, "##b": 1}
    assert missing_forms("abc", vocab) == ["##c"] and missing_forms("ba", vocab) == ["b", "##a"]
    assert missing_forms("", vocab) == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"extend_vocabulary": -1}, r"tokenizer\.extend_vocabulary: -1 must be an integer >= 0"),
        ({"extend_vocabulary": True}, r"tokenizer\.extend_vocabulary: True must be a number, not true/false"),
        ({"unk_warning_rate": 2}, r"tokenizer\.unk_warning_rate: 2 must be in \[0, 1\]"),
    ],
)
def test_bad_vocabulary_parameters_are_named(values, message):
    with pytest.raises(UserError, match=message):
        TokenizerConfig(**values)


def test_extending_a_trained_vocabulary_is_refused():
    from bert_mlm.config import ExperimentConfig

    with pytest.raises(UserError, match=r"tokenizer\.extend_vocabulary: extends an inherited vocabulary"):
        ExperimentConfig.from_parameters({"tokenizer": {"extend_vocabulary": 100}})
