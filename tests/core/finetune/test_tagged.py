"""Token-tagged files: CoNLL-style text and JSONL / Parquet tables read alike, the task kind
decided from the content with its reason, IOB1 / BIOES converted and said, and every bad input
one line naming the file and the line."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.finetune.tagged import load_tagged_task, read_tagged, task_kind
from bert_mlm.errors import UserError

# 张三在北京工作。 / 李四访问上海。 (a person and a place each) and an English sentence.
CHINESE = [(list("张三在北京工作。"), ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "O"]),
           (list("李四访问上海。"), ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"])]
ENGLISH = [("EU rejects German call to boycott British lamb .".split(),
            ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]),
           ("Peter Blackburn".split(), ["B-PER", "I-PER"])]


def conll_text(sentences, separator="\t") -> str:
    return "\n\n".join("\n".join(f"{token}{separator}{tag}" for token, tag in zip(*s, strict=True))
                       for s in sentences) + "\n"


def config_for(path, **overrides) -> FinetuneConfig:
    return FinetuneConfig(**{"train_path": str(path), **overrides})


def written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_conll_chinese_with_tabs(tmp_path):
    path = written(tmp_path, "zh.conll", conll_text(CHINESE))
    frame = read_tagged(str(path), config_for(path), "finetune.train_path")
    assert frame["tokens"].tolist() == [tokens for tokens, _ in CHINESE]
    assert frame["tags"].tolist() == [tags for _, tags in CHINESE] and frame["line"].tolist() == [1, 10]


def test_conll_2003_columns_docstart_spaces_and_gzip(tmp_path):
    """CoNLL-2003 as distributed: four space-separated columns (the tag last), -DOCSTART- lines, IOB1."""
    text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n\n"
            "Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n\n-DOCSTART- -X- -X- O\n\n")
    path = tmp_path / "eng.train.gz"
    path.write_bytes(gzip.compress(text.encode()))
    frame = read_tagged(str(path), config_for(path), "finetune.train_path")
    assert frame["tokens"].tolist() == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert frame["tags"].tolist() == [["I-ORG", "O", "I-MISC", "O"], ["I-PER", "I-PER"]]
    assert frame["line"].tolist() == [3, 8]
    task = load_tagged_task(config_for(path, eval_path=str(path)))
    assert "IOB1 tags, 3 of 6 rewritten to IOB2" in task.notes[0] and len(task.notes) == 2
    assert sorted(map(tuple, task.train["tags"])) == [("B-ORG", "O", "B-MISC", "O"), ("B-PER", "I-PER")]


def test_jsonl_with_string_tags_chinese(tmp_path):
    rows = [{"id": i, "tokens": tokens, "ner_tags": tags} for i, (tokens, tags) in enumerate(CHINESE)]
    path = written(tmp_path, "zh.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    kind = task_kind(config_for(path))
    assert kind.kind == "token" and "list-valued columns 'tokens' and 'ner_tags'" in kind.reason
    frame = read_tagged(str(path), config_for(path), "finetune.train_path")
    assert frame["tokens"].tolist()[1] == list("李四访问上海。") and frame["line"].tolist() == [1, 2]


def test_parquet_of_hugging_face_datasets_names_its_integer_tags(tmp_path):
    datasets = pytest.importorskip("datasets")
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names))})
    rows = ENGLISH + CHINESE
    table = datasets.Dataset.from_dict({"tokens": [t for t, _ in rows],
                                        "ner_tags": [[names.index(tag) for tag in tags] for _, tags in rows]}, features)
    path = tmp_path / "conll2003.parquet"
    table.to_parquet(str(path))
    assert task_kind(config_for(path)).kind == "token"
    frame = read_tagged(str(path), config_for(path), "finetune.train_path")
    assert frame["tags"].tolist() == [tags for _, tags in rows]
    assert frame["tokens"].tolist()[0] == ENGLISH[0][0]
    # The same integers in JSONL carry no names: refused, saying what to do.
    path = written(tmp_path, "ids.jsonl", json.dumps({"tokens": ["Peter"], "ner_tags": [1]}) + "\n")
    with pytest.raises(UserError, match=r"'.*ids.jsonl' row 1: integer tags \(1\) without their names"):
        read_tagged(str(path), config_for(path), "finetune.train_path")


def test_other_columns_are_named_by_the_parameters(tmp_path):
    path = written(tmp_path, "words.jsonl", json.dumps({"words": ["Peter"], "labels": ["B-PER"]}) + "\n")
    assert task_kind(config_for(path)).kind == "sequence"
    config = config_for(path, tokens_column="words", tag_column="labels")
    assert task_kind(config).kind == "token"
    assert read_tagged(str(path), config, "finetune.train_path")["tags"].tolist() == [["B-PER"]]
    with pytest.raises(UserError, match=r"^finetune.tokens_column: .* has no column 'tokens'; its columns are "
                                        r"\['words', 'labels'\]$"):
        read_tagged(str(path), config_for(path), "finetune.train_path")


@pytest.mark.parametrize("text, where, what", [
    ("张\tB-PER\n三\n", "line 2", "'三' has no tag column"),
    ("张\tB-PER\n三\t\n", "line 2", "has no tag column"),
    ("EU\tB-ORG\n\nPeter\tX-PER\n", "line 3", "the tag 'X-PER' is not O, or B-/I-/E-/S-/L-/U- and an entity type"),
    ("张\tB_PER\n三\tI_PER\n", "line 1", "the tag 'B_PER' is not"),
])
def test_a_bad_conll_line_is_one_line_naming_file_and_line(tmp_path, text, where, what):
    path = written(tmp_path, "bad.conll", text)
    with pytest.raises(UserError) as caught:
        read_tagged(str(path), config_for(path), "finetune.train_path")
    message = str(caught.value)
    assert "\n" not in message and what in message
    assert message.startswith(f"finetune.train_path: {str(path)!r} {where}: ")


@pytest.mark.parametrize("row, what", [
    ({"tokens": ["Peter", "Blackburn"], "ner_tags": ["B-PER"]}, "row 2: 2 tokens but 1 tags"),
    ({"tokens": ["北", "京"], "ner_tags": ["B-LOC", "B_LOC"]}, "row 2: the tag 'B_LOC' is not"),
    ({"tokens": "Peter", "ner_tags": ["B-PER"]}, "row 2: columns 'tokens' and 'ner_tags' must hold lists"),
])
def test_a_bad_table_row_is_one_line_naming_file_and_row(tmp_path, row, what):
    good = {"tokens": ["EU"], "ner_tags": ["B-ORG"]}
    path = written(tmp_path, "bad.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in (good, row)) + "\n")
    with pytest.raises(UserError, match=re.escape(what)):
        read_tagged(str(path), config_for(path), "finetune.train_path")


def test_the_kind_of_task_is_decided_from_the_content(tmp_path, shared_dir):
    msra = shared_dir / "corpora/msra-ner/ner_train.conll"
    assert task_kind(config_for(msra)).kind == "token"
    # The new user: MSRA renamed to .tsv was read as a table whose header is "当 O".
    renamed = written(tmp_path, "msra.tsv", msra.read_text(encoding="utf-8")[:200_000])
    kind = task_kind(config_for(renamed))
    assert kind.kind == "token" and "reads as CoNLL: no header" in kind.reason
    english = written(tmp_path, "eng.txt", conll_text(ENGLISH, " "))
    assert task_kind(config_for(english)).kind == "token"
    sst2 = shared_dir / "corpora/sst2/dev.tsv"
    kind = task_kind(config_for(sst2))
    assert kind.kind == "sequence" and "not CoNLL-style" in kind.reason
    assert task_kind(config_for(shared_dir / "corpora/chnsenticorp/ChnSentiCorp_htl_all.csv")).kind == "sequence"
    review = json.dumps({"text": "房间很干净", "label": 1}, ensure_ascii=False)
    reviews = written(tmp_path, "reviews.jsonl", review + "\n")
    assert task_kind(config_for(reviews)).kind == "sequence"
    assert task_kind(config_for(msra, task="sequence")).reason == "finetune.task is sequence"


def test_msra_loads_with_its_seven_labels_and_a_stable_hash_split(shared_dir, msra_head):
    config = config_for(shared_dir / "corpora/msra-ner/ner_train.conll", max_train_examples=300,
                        max_eval_examples=100)
    task = load_tagged_task(config)  # the whole file, once (~3 s)
    assert task.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert len(task.train) == 300 and len(task.evaluation) == 100
    assert "IOB2 tags; 6 I- tag(s) start an entity" in task.notes[0]
    assert not set(task.train["tokens"].map("".join)) & set(task.evaluation["tokens"].map("".join))
    mapping = task.label_mapping()
    assert mapping["id_to_label"][5] == "B-PER" and set(mapping["train_entities"]) == {"LOC", "ORG", "PER"}
    # The same file and settings, the same split and sample: on MSRA's first sentences (a whole read each time).
    head = config.replace(train_path=str(msra_head))
    assert load_tagged_task(head).fingerprint() == load_tagged_task(head).fingerprint()


def test_an_eval_type_training_never_saw_is_refused_before_training(tmp_path):
    train = written(tmp_path, "train.conll", conll_text(CHINESE + ENGLISH[1:]))
    evaluation = written(tmp_path, "eval.conll", conll_text(ENGLISH))
    with pytest.raises(UserError, match=r"^finetune.eval_path: 2 eval entity type\(s\) never occur among the training "
                                        r"sentences \('MISC', 'ORG'\); the training types are \['LOC', 'PER'\]$"):
        load_tagged_task(config_for(train, eval_path=str(evaluation)))


def test_a_file_without_entities_or_sentences_is_refused(tmp_path):
    plain = written(tmp_path, "plain.conll", conll_text([(list("今天天气很好"), ["O"] * 6)] * 4))
    with pytest.raises(UserError, match="tag no entity"):
        load_tagged_task(config_for(plain, eval_path=str(plain)))
    empty = written(tmp_path, "empty.conll", "\n\n-DOCSTART- O\n")
    with pytest.raises(UserError, match="holds no tagged sentence"):
        read_tagged(str(empty), config_for(empty), "finetune.train_path")
    csv = written(tmp_path, "tags.csv", "tokens,ner_tags\n")
    with pytest.raises(UserError, match="is CSV, whose cells hold no lists"):
        read_tagged(str(csv), config_for(csv), "finetune.train_path")
