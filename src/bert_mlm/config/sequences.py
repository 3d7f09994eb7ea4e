"""``sequences``: how the token store is cut into model inputs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bert_mlm.config.base import Section

MODES = ("packed", "document")
PADDINGS = ("static", "dynamic")
MIN_MAX_LENGTH = 8


class SequenceConfig(Section):
    """How the token store is cut into model-input sequences"""

    SECTION = "sequences"

    mode: Literal[MODES] = Field(
        "packed", description="packed: documents concatenated with [SEP], cut into blocks; document: one per sequence")
    padding: Literal[PADDINGS] = Field(
        "dynamic", description="dynamic: per batch, to a multiple of 8; static: always to max_length")
    max_length: int = Field(128, ge=MIN_MAX_LENGTH, description="tokens per sequence, [CLS] included")
