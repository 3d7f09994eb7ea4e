"""``first_line``: the reason a one-line message quotes, whatever the exception's message holds."""

from __future__ import annotations

from bert_mlm.errors import first_line


def test_first_line_of_a_multi_line_message():
    assert first_line(ValueError("\n  bad header  \nTraceback detail\n")) == "bad header"
    assert first_line(OSError("文件已损坏\n第二行")) == "文件已损坏"


def test_first_line_of_an_empty_message_is_the_type_name():
    assert first_line(KeyError()) == "KeyError"
    assert first_line(RuntimeError("  \n ")) == "RuntimeError"
