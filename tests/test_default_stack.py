"""The stack of a request that names none is passed in, never switched by a module setting: the
newest preset (model/specs/stack.py: load_stack(None), its one place), and a caller that wants
none says so (tests/unstacked.py does for the formula tests)."""

from __future__ import annotations

import pandas as pd

import model.specs.stack as stack_module
from model import Request, load_model, load_system, search
from model.specs.stack import NONE, default_stack_name, load_stack
from tests.unstacked import search as unstacked_search


def _rows(result) -> pd.DataFrame:
    return result.top.drop(columns=["elapsed_s"], errors="ignore").reset_index(drop=True)


def test_no_module_setting_chooses_the_default_stack():
    assert not hasattr(stack_module, "DEFAULT")
    assert load_stack(None).name == default_stack_name() != NONE


def test_a_request_without_a_stack_runs_the_newest_and_none_must_be_named():
    m, s = load_model("llama3-8b"), load_system("h100")
    plain = search(Request.build(m, s, global_batch=64, gpus=8, top_k=3))
    newest = search(m, s, 8, 64, "1d", top_k=3, stack=default_stack_name())
    pd.testing.assert_frame_equal(_rows(plain), _rows(newest))
    bare = search(m, s, 8, 64, "1d", top_k=3, stack=NONE)
    pd.testing.assert_frame_equal(_rows(unstacked_search(m, s, 8, 64, "1d", top_k=3)),
                                  _rows(bare))
    # the stack's calibrated efficiencies move the answer: the two defaults differ
    assert plain.best["iteration_time_s"] != bare.best["iteration_time_s"]
    # a call that names a stack keeps it
    named = unstacked_search(m, s, 8, 64, "1d", top_k=3, stack=default_stack_name())
    pd.testing.assert_frame_equal(_rows(named), _rows(newest))
