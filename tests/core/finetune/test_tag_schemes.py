"""Tag schemes: well-formed tags, the scheme a file uses, and its conversion to IOB2."""

from __future__ import annotations

import pytest

from bert_mlm.core.finetune.tag_schemes import BIOES, IOB1, IOB2, is_tag, tag_labels, to_iob2


@pytest.mark.parametrize("tag", ["O", "B-PER", "I-LOC", "E-ORG", "S-MISC", "L-PER", "U-PER", "B-PER-NAME", "B-人名"])
def test_well_formed_tags(tag):
    assert is_tag(tag)


@pytest.mark.parametrize("tag", ["X-PER", "B_PER", "PER", "B-", "b-per", "O-PER", "B PER", "", "0"])
def test_tags_outside_the_scheme(tag):
    assert not is_tag(tag)


def test_iob2_is_kept_as_it_is():
    sentences = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "B-ORG", "I-ORG"], []]
    tags, report = to_iob2(sentences)
    assert tags == sentences
    assert (report.scheme, report.converted, report.stray_inside, report.tags) == (IOB2, 0, 0, 7)
    assert report.describe("'a.conll'") == "'a.conll': IOB2 tags"


def test_iob1_starts_entities_with_i_and_separates_neighbours_with_b():
    # CoNLL-2003's original files: I- starts an entity, B- only where it follows one of its own type.
    english = [["I-ORG", "O", "I-MISC", "I-MISC", "O"], ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
    chinese = [["I-LOC", "I-LOC", "O", "I-PER", "B-PER"]]  # 北京 的 张 王: two people side by side
    tags, report = to_iob2(english + chinese)
    assert tags == [["B-ORG", "O", "B-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "B-PER", "O", "B-LOC"],
                    ["B-LOC", "I-LOC", "O", "B-PER", "B-PER"]]
    assert (report.scheme, report.converted, report.stray_inside) == (IOB1, 6, 0)
    assert "IOB1 tags, 6 of 15 rewritten to IOB2" in report.describe("x")


def test_an_i_tag_across_a_sentence_boundary_starts_a_new_entity():
    tags, report = to_iob2([["O", "I-PER"], ["I-PER", "O"]])
    assert tags == [["O", "B-PER"], ["B-PER", "O"]] and report.scheme == IOB1


@pytest.mark.parametrize("single, last", [("S", "E"), ("U", "L")])
def test_bioes_and_bilou_become_iob2(single, last):
    sentences = [[f"{single}-PER", "O", "B-LOC", f"{last}-LOC"], ["B-ORG", "I-ORG", f"{last}-ORG", f"{single}-ORG"]]
    tags, report = to_iob2(sentences)
    assert tags == [["B-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "I-ORG", "I-ORG", "B-ORG"]]
    assert (report.scheme, report.converted, report.stray_inside) == (BIOES, 4, 0)


def test_stray_i_tags_in_iob2_are_kept_and_counted():
    """MSRA has a few I- tags after O: strict IOB2 (seqeval's mode="strict") starts no entity
    there; the data is not rewritten, the count is reported."""
    sentences = [["B-PER", "I-PER", "O", "I-LOC", "I-LOC"], ["B-LOC", "I-PER"], ["B-ORG"]]
    tags, report = to_iob2(sentences)
    assert tags == sentences
    assert (report.scheme, report.converted, report.stray_inside) == (IOB2, 0, 2)
    assert "2 I- tag(s) start an entity" in report.describe("x") and "mode='strict'" in report.describe("x")


def test_the_label_list_has_o_first_and_both_tags_of_every_type():
    assert tag_labels(["O", "B-PER", "I-PER", "B-LOC", "B-ORG", "I-ORG"]) == [
        "O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]  # I-LOC: for a B-LOC word's continuation pieces
