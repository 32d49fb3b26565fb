"""The MoE validation set (reference/moe_measurements.json, model.validation.moe): every record
becomes a case (or says why not), its model FLOPs per token match the published model TFLOP/s
÷ tokens/s, and its precision, stack, source and recipe facts are read as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.validation import SETS, time_cases
from model.validation.moe import MOE_RUNS, moe_case, moe_cases, moe_records

RECORDS = moe_records()


def test_every_record_is_a_case_or_says_why_not():
    cases = moe_cases()
    assert len(cases) == len(RECORDS) == 63
    skipped = {c.id: c.skip for c in cases if c.skip}
    # the 25.11 DeepSeek-V3 without MTP on pp 2 × vp 4: 61 layers do not split into equal chunks
    assert set(skipped) == {"mbridge2511_GB300_DeepSeekV3_BF16_256",
                            "mbridge2511_GB300_DeepSeekV3_FP8-MX_256"}
    assert all("uneven virtual-pipeline chunks" in why for why in skipped.values())
    for c in cases:
        if not c.skip:
            assert c.model.moe and c.measured > 0 and c.config["ep"] >= 8


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_model_flops_per_token_match_the_published_ones(record):
    """Megatron-Bridge's model TFLOP/s per GPU ÷ its tokens/s per GPU is its model FLOPs per
    token (Megatron-LM's formula); ours (6 × active matmul parameters + attention, the MTP
    module where the run has one) within 3 %."""
    case = moe_case(record)
    published = record["model_tflops_per_gpu"] * 1e12 / record["tokens_per_s_per_gpu"]
    assert case.model.model_flops_per_token == pytest.approx(published, rel=0.03)


def test_precision_stack_source_and_recipe_are_read_as_documented():
    by_id = {r["id"]: moe_case(r) for r in RECORDS}
    patch = by_id["mbridge260201_GB300_DeepSeekV3_MXFP8_256"]
    assert (patch.source, patch.stack) == ("megatron-bridge-26.02", "megatron-bridge-26.02")
    assert by_id["mbridge2608_GB200_DeepSeekV3_MXFP8_256"].stack == "megatron-bridge-26.08"
    old = by_id["mbridge2509_B200_DeepSeekV3__256"]  # no precision column on the 25.09 page
    assert old.execution["precision"] == "fp8"
    assert old.execution["moe_capacity_factor"] == 1.0  # token drop, padded to capacity
    assert old.execution["ep_dispatcher"] == "alltoall"
    assert by_id["mbridge2511_GB200_DeepSeekV3_FP8-MX_256"].execution["precision"] == "mxfp8"
    assert by_id["mbridge2511_GB200_DeepSeekV3_BF16_256"].model.mtp_layers == 0  # w/o MTP
    assert by_id["mbridge2511_B200_DeepSeekV3_FP8-MX_256"].model.mtp_layers == 1  # w/ MTP
    # 26.06 turned the all-to-all overlap on for GB200/GB300 MXFP8 (its recipe)
    assert not by_id["mbridge2604_GB200_DeepSeekV3_MXFP8_256"].execution["ep_overlap"]
    assert by_id["mbridge2606_GB200_DeepSeekV3_MXFP8_256"].execution["ep_overlap"]
    h100 = by_id["mbridge2509_H100_DeepSeekV3__1024"]
    assert (h100.config["tp1"], h100.config["ep"], h100.config["dp"]) == (2, 64, 64)


def test_the_corrected_record_keeps_its_note():
    record = next(r for r in RECORDS if r["id"] == "mbridge2509_GB200_DeepSeekV3__256")
    assert (record["pp"], record["vp"]) == (4, 4) and "4 (8)" in record["note"]
    assert json.loads(Path(MOE_RUNS).read_text())["records"][0]["source"].startswith("NVIDIA")


def test_a_malformed_record_is_skipped_not_raised():
    bad = {**RECORDS[0], "hf_config": {"model_type": "llama"}}
    assert "malformed record" in moe_case(bad).skip
    assert moe_case({"id": "x", "pp": 2}).skip


def test_validation_sets():
    assert "moe" in SETS
    ids = {c.id for c in time_cases(sets=("moe",))}
    assert len(ids) == 61  # one per case (test_every_case_names_one_run)
    assert not ids & {c.id for c in time_cases()}  # the dense sets hold no MoE run


def test_every_case_names_one_run():
    """26.06 published two GB300 DeepSeek-V3 rows under one id (global batch 4096 and 15,360):
    each case gets its batch appended, so tables and figures keyed by id keep both."""
    cases = moe_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) == len(moe_records())
    twins = {c.id: c for c in cases if c.id.startswith("mbridge2606_GB300_DeepSeekV3_MXFP8_256")}
    assert set(twins) == {"mbridge2606_GB300_DeepSeekV3_MXFP8_256_gbs4096",
                          "mbridge2606_GB300_DeepSeekV3_MXFP8_256_gbs15360"}
    assert twins["mbridge2606_GB300_DeepSeekV3_MXFP8_256_gbs15360"].global_batch == 15360
