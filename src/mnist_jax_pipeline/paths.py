"""Where every artefact lives. Both orchestrators use these paths through the CLI defaults."""

from __future__ import annotations

RAW_DIR = "data/raw"
PROCESSED_DIR = "data/processed"
MODEL = "models/{variant}.safetensors"
TRAIN_METRICS = "metrics/train/{variant}.json"
TRAIN_HISTORY = "plots/train/{variant}.csv"
EVAL_METRICS = "metrics/evaluate/{variant}.json"
CONFUSION = "plots/confusion/{variant}.csv"
EVAL_DETAILS = "metrics/evaluate/{variant}_details.json"
PROFILE_DIR = "reports/profile"
REPORT_HTML = "reports/report.html"
REPORT_MD = "reports/summary.md"
FIGURES_DIR = "reports/figures"


def for_variant(template: str, variant: str) -> str:
    return template.format(variant=variant)
