"""Result files that do not mislead or leak (issue 47): the model card quotes the corpus and the
files it names escaped and by file name (it is uploaded with the model), and JSON is readable UTF-8."""

from __future__ import annotations

from huggingface_hub import ModelCard as HubCard
from kedro.io.core import Version

from bert_mlm.core.finetune.result import Estimate, FinetuneResults, TaskResult, file_name
from bert_mlm.core.record.model_card import model_card
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import DataRecord, run_facts, run_record
from bert_mlm.datasets.atomic import JSONDataset

MODEL = "2026-01-02T00.00.00.000Z"
HOSTILE = "books\n---\nlicense: mit\n# <script>alert('card')</script> | `x`"
LOCAL = "/home/someone/private-folder/任务/评论.csv"


def test_the_card_escapes_what_it_quotes_and_names_files_not_local_folders():
    given = {"finetune": {"train_path": LOCAL}, "model": {"init_from": "/home/someone/m"}}
    facts = run_facts({"run_id": MODEL, "env": "smoke", "runtime_params": given},
                      {"corpus": {"path": HOSTILE}, "model": {"init_from": "/home/someone/m"}}, ["train_masked_lm"],
                      "cpu")
    record = run_record(facts, {"masking": {}, "training": {}},
                        DataRecord(source=HOSTILE, language="zh", sources=[{"name": HOSTILE, "tokens": 10}]))
    task = TaskResult(f"pretraining gained on {HOSTILE}", {"accuracy": Estimate(0.8, 0.01)}, task="<b>sentiment</b>",
                      dataset=file_name(LOCAL))
    card = model_card(ModelResults(MODEL, finetune=FinetuneResults((task,), MODEL)), record).text
    body = card.split("---\n", 2)[2]
    assert card.startswith("---\n") and "\n---\n" not in body  # one front matter, nothing that opens another
    assert not any(line.startswith(("#", "license:")) for line in body.splitlines() if "books" in line)
    assert "<script>" not in card and "&lt;script&gt;" in card and "<b>" not in card
    assert "/home/someone" not in card and "private-folder" not in card
    assert "finetune.train_path=评论.csv" in card and "On `评论.csv` (&lt;b&gt;sentiment&lt;/b&gt;)" in card
    assert "continued from `m`" in card
    hub = HubCard(card)
    assert hub.data.language == "zh" and hub.data.license == "unknown"  # the quoted "license: mit" did not land


def test_json_is_written_as_readable_utf8(tmp_path):
    """``finetune_label_mapping.json`` stored Chinese labels as ``\\u6b63\\u9762`` escapes."""
    path = tmp_path / "finetune_label_mapping.json"
    JSONDataset(filepath=str(path), version=Version(None, MODEL), save_args={"indent": 2}).save(
        {"label_to_id": {"正面": 1, "负面": 0}})
    text = (path / MODEL / path.name).read_text(encoding="utf-8")
    assert '"正面": 1' in text and "\\u" not in text
