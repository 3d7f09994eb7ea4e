"""Step records: one definition of the history's columns, rows without the validation a step did not run."""

from __future__ import annotations

import json

from bert_mlm.core.train.records import HISTORY_COLUMNS, StepRecord, history_frame


def test_a_row_holds_the_validation_columns_only_where_a_validation_ran():
    plain = StepRecord(step=1, epoch=0, masked_tokens=12, mask_probability=0.15, tokens=80, learning_rate=1e-3)
    validated = StepRecord(step=2, epoch=0, masked_tokens=10, mask_probability=0.15, tokens=80, learning_rate=1e-3,
                           valid_loss=2.5, valid_loss_se=0.1, valid_accuracy=0.4, valid_masked_tokens=300,
                           valid_seconds=0.2, valid_frequent_share=0.3, valid_baseline_accuracy=0.05)
    assert "valid_loss" not in plain.as_dict()
    assert list(validated.as_dict()) == list(HISTORY_COLUMNS)
    assert list(plain.as_dict()) == [c for c in HISTORY_COLUMNS if not c.startswith("valid_")]


def test_history_puts_rows_read_back_from_a_checkpoint_in_column_order():
    """A checkpoint stores rows as JSON with sorted keys; the history's columns keep the loop's order."""
    rows = [StepRecord(step=s, epoch=0, masked_tokens=5, mask_probability=0.15, tokens=40, learning_rate=1e-3,
                       **({"valid_loss": 3.0} if s == 2 else {})).as_dict() for s in (1, 2)]
    stored = json.loads(json.dumps(rows, sort_keys=True))
    frame = history_frame(stored)
    assert list(frame.columns) == [c for c in HISTORY_COLUMNS if c in frame]
    assert frame["valid_loss"].isna().tolist() == [True, False]
