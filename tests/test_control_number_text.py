"""Issue 29, item 10: a control's bounds in its messages are written by the project's one number
formatter (model/cli/numbers.py), never in scientific notation: the training budget's upper
bound read "1e+18" (dashboard/controls/inputs.py: number_text wrote it with ':g')."""

from __future__ import annotations

from dashboard.controls.control_table import BY_KEY
from dashboard.controls.inputs import check_value, expected, number_text

QUINTILLION = "1,000,000,000,000,000,000"


def test_a_bound_is_written_in_full_with_separators() -> None:
    assert number_text(1e18) == QUINTILLION
    assert [number_text(v) for v in (10_000_000, 16384, 0.01, 0.001, 2.5, 1.0)] == [
        "10,000,000", "16,384", "0.01", "0.001", "2.5", "1"]


def test_the_training_budget_messages_name_their_bound_in_words_people_read() -> None:
    budget = BY_KEY["budget"]
    assert expected(budget).endswith(f"to {QUINTILLION}"), expected(budget)
    value, message = check_value(budget, 2e18)
    assert value is None and message == f"Training budget must be at most {QUINTILLION}"
    assert "e+" not in expected(budget) + message
