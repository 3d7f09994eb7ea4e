"""``tokenizer``: the WordPiece vocabulary, trained on the corpus or loaded."""

from __future__ import annotations

from pydantic import Field

from bert_mlm.config.base import Section

# [PAD] [UNK] [CLS] [SEP] [MASK]: bert_mlm.core.tokenizer.SPECIAL_TOKENS (a test holds them equal)
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
