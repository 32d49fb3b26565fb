"""Predicted vs measured: the estimator against published training runs
(:mod:`model.validation.published`), the error bars, calibrations and held-out checks built on
them. This package's face only: each name lives in its module."""

from model.validation.published import (
    DENSE_SETS,
    EXTRA_RUNS,
    PYTORCH_RUNS,
    REFERENCE,
    SETS,
    measurement_case,
    predict,
    predict_row,
    pytorch_cases,
    record_system,
    reference_dir,
    run_validation,
    summary,
    time_cases,
)

__all__ = ["DENSE_SETS", "EXTRA_RUNS", "PYTORCH_RUNS", "REFERENCE", "SETS", "measurement_case",
           "predict", "predict_row", "pytorch_cases", "record_system", "reference_dir",
           "run_validation", "summary", "time_cases"]
