#!/usr/bin/env python3
"""File a run of record's JSON (tools/device-run.sh's OUT) in benchmarks/results/, dated and device named:
manifest.json as <date>-device-run-<device>.json, bench-train.json as <date>-train-<device>.json and so on;
a second run of the day numbered (<date>-device-run-2-<device>.json). A --smoke run is refused.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from device_run import OneLineParser, UserError  # beside this file

ROOT = Path(__file__).resolve().parents[1]
FILED = {"manifest.json": "device-run", "bench-train.json": "train", "bench-command-buffers.json": "command-buffers"}
FILED["bench-time-to-accuracy.json"] = "time-to-accuracy"


def device_name(manifest: dict) -> str:
    """The GPU's name as nvidia-smi gives it, else JAX's device kind."""
    device: dict = manifest["device"] if isinstance(manifest.get("device"), dict) else {}
    name = str((device.get("nvidia_smi") or [""])[0]).split(",")[0].strip() or device.get("device_kind")
    if not name:
        raise UserError("manifest.json names no device: the train stage recorded none")
    return name


def file_results(out: Path, results: Path) -> list[Path]:
    """Copy OUT's JSON into `results` under the first run number free for all of them; the files written."""
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"{out / 'manifest.json'}: cannot read it ({err})") from err
    if not isinstance(manifest, dict) or not re.fullmatch(r"\d{4}-\d\d-\d\d", str(manifest.get("date"))):
        raise UserError(f"{out / 'manifest.json'}: not a run's manifest (no date YYYY-MM-DD); give device-run's OUT")
    if manifest.get("smoke"):
        raise UserError(f"{out}: a --smoke run measures nothing; run tools/device-run.sh without --smoke")
    device = re.sub(r"[^a-z0-9]+", "-", device_name(manifest).lower()).strip("-")
    sources = [out / name for name in FILED if (out / name).is_file()]
    for number in range(1, 100):
        run = "" if number == 1 else f"-{number}"
        pairs = [(s, results / f"{manifest['date']}-{FILED[s.name]}{run}-{device}.json") for s in sources]
        if all(not t.exists() or t.read_bytes() == s.read_bytes() for s, t in pairs):
            for source, target in pairs:
                shutil.copyfile(source, target)
            return [target for _, target in pairs]
    raise UserError(f"{results}: 99 runs of {manifest['date']} on {device} filed already")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="tools/device-import.py", description="File a run of record in benchmarks/results/.")
    parser.add_argument("out", type=Path, help="tools/device-run.sh's output folder")
    args = parser.parse_args(argv)
    try:
        print("\n".join(str(path) for path in file_results(args.out, ROOT / "benchmarks" / "results")))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
