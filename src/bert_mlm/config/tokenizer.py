"""``tokenizer``: the WordPiece vocabulary, trained on the corpus or loaded."""

from __future__ import annotations

from pydantic import Field

from bert_mlm.config.base import Section

# [PAD] [UNK] [CLS] [SEP] [MASK]: bert_mlm.core.tokens.tokenizer.SPECIAL_TOKENS (a test holds them equal)
SPECIAL_TOKEN_COUNT = 5


class TokenizerConfig(Section):
    """The WordPiece vocabulary: trained on the train split, or loaded"""

    SECTION = "tokenizer"

    vocab_size: int = Field(
        8192, gt=SPECIAL_TOKEN_COUNT, description="WordPiece vocabulary size (special tokens included)",
        json_schema_extra={"requirement": f"an integer larger than the {SPECIAL_TOKEN_COUNT} special tokens"})
    min_frequency: int = Field(2, ge=1, description="a pair must occur this often to be merged")
    lowercase: bool = Field(True, description="lowercase the text (BERT uncased)")
    strip_accents: bool | None = Field(
        None, description="null: strip when lowercasing (BERT uncased), but not on mostly-CJK text (kana keep が)")
    chinese_chars: bool = Field(True, description="one token per CJK character, as BERT does")
    limit_alphabet: int | None = Field(
        None, ge=1, description="null: every character that occurs min_frequency times (a cap of 1000 lost most "
                                "Chinese characters)")
    vocab_path: str | None = Field(None, description="an existing vocab.txt or tokenizer directory instead of training")
    training_sample_bytes: int | None = Field(
        100_000_000, ge=1_000_000,
        description="train the vocabulary on an evenly spread ~100 MB sample of a larger train split (null: all)")
    base_alphabet: str | None = Field(
        "default", min_length=1,
        description="always kept: default (printable ASCII, common punctuation, symbols, currency, CJK full-width "
                    "punctuation), none, or the characters themselves")
    # 0.1 %: inherited vocabularies measured on text of their own language gave 0-0.064 % (English);
    # those lacking characters of the text 0.15-0.97 % (Chinese reviews and news under a news or the
    # bert-base-chinese vocabulary; BENCHMARKS.md "Vocabulary coverage and extension").
    unk_warning_rate: float = Field(
        0.001, ge=0, le=1,
        description="an inherited vocabulary (model.init_from, vocab_path) turning more of the training text into "
                    "[UNK] than this (0.1 %) gets a warning naming what it lacks")
    extend_vocabulary: int = Field(
        0, ge=0,
        description="add up to N tokens the inherited vocabulary lacks (Chinese: characters; otherwise missing "
                    "characters, then WordPiece pieces learned on the text); new embedding rows start from the mean "
                    "of their old pieces (0: off)")
