"""Entity tag schemes: which tags are well formed, which scheme a file uses, and its conversion to
IOB2, the scheme every token task is trained and scored in.

Accepted: IOB2 (``B-`` starts every entity), IOB1 (``I-`` starts an entity, ``B-`` only where one
follows another of the same type), and BIOES / IOBES / BILOU (``S-``/``U-`` a one-word entity,
``E-``/``L-`` its last word). A tag is ``O`` or one of those prefixes, ``-`` and a type (``B-PER``);
anything else (``X-PER``, ``B_PER``, ``PER``) is refused by the reader with its line.

An ``I-`` tag that starts an entity in IOB2 data (MSRA's training file has 6 among 2 million tags)
is left as it is and, as in seqeval's ``mode="strict"``, starts no entity, in gold tags or
predictions (``core.finetune.entities``); :class:`SchemeReport` counts them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

OUTSIDE = "O"
TAG = re.compile(r"^(?:O|[BIESLU]-\S+)$")
TAG_HELP = "O, or B-/I-/E-/S-/L-/U- and an entity type (B-PER)"
IOB2, IOB1, BIOES = "IOB2", "IOB1", "BIOES"
# BIOES and BILOU to IOB2: a single-word entity begins (S-, U- -> B-), a last word continues (E-, L- -> I-).
TO_IOB2_PREFIX = {"S": "B", "U": "B", "E": "I", "L": "I"}


def is_tag(tag: str) -> bool:
    return TAG.match(tag) is not None


def entity_type(tag: str) -> str | None:
    """``PER`` for ``B-PER``; ``None`` for ``O``."""
    return None if tag == OUTSIDE else tag[2:]


@dataclass(frozen=True)
class SchemeReport:
    """What reading one file's tags found: its scheme, how many tags were rewritten to IOB2, and
    how many ``I-`` tags start an entity after the conversion (strict IOB2: no entity there)."""

    scheme: str
    converted: int
    stray_inside: int
    tags: int

    def describe(self, where: str) -> str:
        text = f"{where}: {self.scheme} tags"
        if self.scheme != IOB2:
            text += f", {self.converted:,} of {self.tags:,} rewritten to IOB2"
        if self.stray_inside:
            text += (f"; {self.stray_inside:,} I- tag(s) start an entity (after O or another type): strict IOB2, as "
                     "seqeval's mode='strict', counts no entity there")
        return text


def sentence_starts(lengths: np.ndarray, total: int) -> np.ndarray:
    """Per position of sentences flattened one after another (``lengths`` positions each, ``total``
    in all): whether it is the first of its sentence."""
    starts = np.zeros(total, dtype=bool)
    offsets = np.cumsum(lengths) - lengths
    starts[offsets[offsets < total]] = True
    return starts


def _after_same_type_entity(prefix: np.ndarray, types: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per position: the tag before it, in its sentence, is an entity tag of the same type."""
    before = np.zeros(len(prefix), dtype=bool)
    before[1:] = (prefix[:-1] != OUTSIDE) & (types[:-1] == types[1:])
    return before & ~starts


def to_iob2(sentences: Sequence[Sequence[str]]) -> tuple[list[list[str]], SchemeReport]:
    """The sentences' tags (each well formed, see :func:`is_tag`) in IOB2, and what was done.

    BIOES/BILOU is recognised by its ``E-``/``S-``/``L-``/``U-`` tags. With only ``B-`` and ``I-``
    tags the file is IOB1 when some ``I-`` starts an entity and no ``B-`` follows anything but its
    own type (in IOB1 ``B-`` only separates two adjacent entities of one type); else IOB2."""
    lengths = np.fromiter((len(tags) for tags in sentences), dtype=np.int64, count=len(sentences))
    codes, distinct = pd.factorize(pd.Series([tag for tags in sentences for tag in tags], dtype=object))
    prefix = np.array([tag[0] for tag in distinct], dtype=object)[codes]  # per position: O, B, I, E, S, L or U
    types = np.array([tag[2:] for tag in distinct], dtype=object)[codes]  # and its entity type ("" for O)
    starts = sentence_starts(lengths, len(codes))
    continues = _after_same_type_entity(prefix, types, starts)
    if {tag[0] for tag in distinct} & set(TO_IOB2_PREFIX):
        scheme = BIOES
        new_prefix = np.array([TO_IOB2_PREFIX.get(p, p) for p in prefix], dtype=object)
    else:
        inside_starts = (prefix == "I") & ~continues
        begin_after_other = (prefix == "B") & ~continues
        scheme = IOB1 if inside_starts.any() and not begin_after_other.any() else IOB2
        new_prefix = np.where(inside_starts, "B", prefix) if scheme == IOB1 else prefix
    changed = new_prefix != prefix
    stray = int(((new_prefix == "I") & ~_after_same_type_entity(new_prefix, types, starts)).sum())
    report = SchemeReport(scheme, int(changed.sum()), stray, len(prefix))
    if not changed.any():
        return [list(tags) for tags in sentences], report
    rewritten = np.where(new_prefix == OUTSIDE, OUTSIDE, new_prefix + "-" + types)
    bounds = np.cumsum(lengths)[:-1]
    return [part.tolist() for part in np.split(rewritten, bounds)], report


def tag_labels(tags: Sequence[str]) -> list[str]:
    """The label list of a tagger trained on ``tags`` (IOB2): ``O``, then ``B-`` and ``I-`` of
    every entity type in alphabetical order. Both tags of each type, so that a type seen only in
    one-word entities still has the ``I-`` that ``finetune.label_all_pieces`` gives a word's
    continuation pieces."""
    kinds = sorted({entity_type(tag) for tag in tags} - {None})
    return [OUTSIDE, *(f"{prefix}-{kind}" for kind in kinds for prefix in "BI")]
