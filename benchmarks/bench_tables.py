"""What pandas costs and gives the pipeline's tables: its import in a fresh process, and each table
job done by hand (csv, dicts) and with pandas, on sizes the pipeline meets.

    python benchmarks/bench_tables.py [--repeats 5] [--json]

1. start-up, each command once to warm the page cache, then the median of --repeats fresh processes:
   `python -c "import csv"` against `python -c "import pandas"`, `-X importtime`'s cumulative figure
   for pandas, and what pandas adds to a process that has already imported what a command imports
   (`mnist_jax_pipeline.stages.report.render`, the report stage's module; `comparison.compare`), and
   `mnist-pipeline report`'s start-up with and without pandas (in a folder without data, where the
   command stops at its first read, after its imports and params.yaml's checks);
2. the table jobs in one process (pandas imported first), each the median of many calls, both ways,
   and checked to give the same text: a history CSV written and read back, plots/variants.csv,
   a sweep's results.csv with the page's rows, and `show`'s table.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import options
import pandas as pd

from mnist_jax_pipeline.artefacts.training import EpochRow
from mnist_jax_pipeline.comparison.compare import COLUMNS
from mnist_jax_pipeline.foundation.runtime import cpu_model

PY = sys.executable


def fresh(code: str, repeats: int, cwd: str | None = None, check: bool = True) -> float:
    """Median wall seconds of `python -c code` in a fresh process, after one warm-up run."""
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run([PY, "-c", code], check=check, capture_output=True, cwd=cwd)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def importtime(module: str, before: str = "") -> float:
    """-X importtime's cumulative seconds for `module` (after importing `before`, if given)."""
    code = f"import {before}\nimport {module}" if before else f"import {module}"
    err = subprocess.run([PY, "-X", "importtime", "-c", code], check=True, capture_output=True, text=True).stderr
    line = [x for x in err.splitlines() if x.rstrip().endswith(f"| {module}")][-1]
    return int(line.split("|")[1]) / 1e6


def startup(repeats: int) -> dict[str, float]:
    """Fresh-process seconds: the bare imports, and pandas on top of what a command already imports."""
    report, compare = "mnist_jax_pipeline.stages.report.render", "mnist_jax_pipeline.comparison.compare"
    command = "import sys; from mnist_jax_pipeline.cli import main; sys.exit(main(['report']))"
    with tempfile.TemporaryDirectory() as empty:  # params.yaml, no data: the command stops after its start-up
        shutil.copy(Path(__file__).resolve().parents[1] / "params.yaml", empty)
        report_cmd = fresh(command, repeats, empty, check=False)
        report_cmd_pandas = fresh(f"import pandas; {command}", repeats, empty, check=False)
    return {
        "python -c 'import csv'": fresh("import csv", repeats),
        "python -c 'import pandas'": fresh("import pandas", repeats),
        "importtime pandas (cumulative)": importtime("pandas"),
        f"import {report}": fresh(f"import {report}", repeats),
        f"import {report}, then pandas": fresh(f"import {report}; import pandas", repeats),
        f"importtime pandas after {report}": importtime("pandas", report),
        "mnist-pipeline report, start-up (no data: stops at its first read)": report_cmd,
        "the same, pandas imported first": report_cmd_pandas,
        "importtime pandas after matplotlib.figure (compare's other heavy import)": importtime(
            "pandas", "matplotlib.figure"
        ),
        f"import {compare} (pandas included)": fresh(f"import {compare}", repeats),
    }


def history(epochs: int, variant: str = "") -> list[dict[str, Any]]:
    return [
        {
            "epoch": e,
            "epoch_seconds": 0.1234567 + e / 7,
            "train_loss": 1 / (e + 3),
            "train_accuracy": 1 - 1 / (e + 9),
            "test_accuracy": 1 - 1 / (e + 11),
            **({"variant": variant} if variant else {}),
        }
        for e in range(1, epochs + 1)
    ]


def csv_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def pandas_text(tables: list[list[dict[str, Any]]]) -> str:
    """The tables' rows, one after another, as CSV."""
    frame = pd.concat([pd.DataFrame(rows) for rows in tables], ignore_index=True)
    return frame.to_csv(index=False, lineterminator="\n")


def read_csv_rows(text: str) -> list[EpochRow]:
    return [EpochRow.model_validate(row, strict=False) for row in csv.DictReader(text.splitlines())]


def read_pandas_rows(text: str) -> list[EpochRow]:
    frame = pd.read_csv(
        io.StringIO(text),
    )  # pandas 3 reads floats back exactly by default
    return [EpochRow.model_validate(row, strict=False) for row in frame.to_dict("records")]


def sweep_runs(points: int) -> tuple[list[dict[str, Any]], list[str]]:
    keys = ["train.step_size", "train.epochs", "model.layer_sizes"]
    runs = [
        {
            "name": f"point-{i}",
            "test_accuracy": round(0.9 + (i * 37 % 97) / 1000, 4),
            "test_loss": 0.1 + i / 1e3,
            "total_train_seconds": 3.0 + i % 5,
            "epoch_seconds_median": 0.3,
            "compile_seconds": None if i % 3 else 0.5,
            "epochs": 10,
            "busy": None,
            "params": {"train.step_size": i / 100, "train.epochs": 10, "model.layer_sizes": [784, 32 + i, 10]},
        }
        for i in range(points)
    ]
    return runs, keys


def results_by_hand(runs: list[dict[str, Any]], keys: list[str]) -> str:
    rows = sorted(runs, key=lambda r: (-r["test_accuracy"], r["total_train_seconds"]))
    columns = list(COLUMNS)  # results.csv's columns, as the hand-written writer had them
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*columns, *keys], lineterminator="\n")
    writer.writeheader()
    writer.writerows({**{k: row[k] for k in columns}, **row["params"]} for row in rows)
    return out.getvalue()


def results_pandas(runs: list[dict[str, Any]], keys: list[str]) -> str:
    records = [{k: v for k, v in run.items() if k != "params"} | run["params"] for run in runs]
    frame = pd.DataFrame.from_records(records, columns=[*records[0]]).astype(object)
    frame = frame.sort_values(["test_accuracy", "total_train_seconds"], ascending=[False, True], ignore_index=True)
    frame.to_dict("records")  # the page's rows
    return frame.drop(columns="busy").to_csv(index=False, lineterminator="\n")


def show_cells(rows: int) -> list[tuple[str, ...]]:
    return [
        (
            f"exp-{i}",
            ("nojit", "jit", "jit_scan")[i % 3],
            f"{90 + i % 9:.2f}%",
            f"{0.1 + i / 1e3:.4g}",
            f"{0.3 + i / 100:.3f}",
            "-",
            f"train.step_size={i / 100}",
        )
        for i in range(rows)
    ]


HEADER = ("experiment", "variant", "test acc", "loss", "epoch s", "compile s", "changed from HEAD")


def show_by_hand(cells: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in (HEADER, *cells)) for i in range(len(HEADER) - 1)]
    return "\n".join(
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=False)))
        + f"  {line[-1]}"
        for line in (HEADER, *cells)
    )


def show_pandas(cells: list[tuple[str, ...]]) -> str:
    """As experiments.table: the header over the cells, each column padded with pandas' string methods."""
    frame = pd.concat([pd.DataFrame([HEADER], columns=HEADER), pd.DataFrame(cells, columns=HEADER)], ignore_index=True)
    for i, column in enumerate(HEADER[:-1]):
        text = frame[column].str
        frame[column] = text.rjust(text.len().max()) if i > 1 else text.ljust(text.len().max())
    return "\n".join(frame.agg("  ".join, axis=1))


def per_call(job: Callable[[], object]) -> float:
    """Median seconds of one call, over 7 rounds of enough calls to take about 0.1 s."""
    job()
    number = max(1, int(0.1 / max(timeit.timeit(job, number=1), 1e-7)))
    return statistics.median(timeit.repeat(job, number=number, repeat=7)) / number


def jobs() -> dict[str, dict[str, float | bool]]:
    """Each table job both ways: seconds per call, and whether both give the same text."""
    out: dict[str, dict[str, float | bool]] = {}

    def both(name: str, by_hand: Callable[[], Any], with_pandas: Callable[[], Any], same: bool | None = None) -> None:
        out[name] = {
            "by_hand_s": per_call(by_hand),
            "pandas_s": per_call(with_pandas),
            "same_output": by_hand() == with_pandas() if same is None else same,
        }

    for epochs in (10, 100):
        rows = history(epochs)
        variants = [history(epochs, v) for v in ("nojit", "jit", "jit_scan")]
        both(f"history CSV write, {epochs} epochs", partial(csv_text, rows), partial(pandas_text, [rows]))
        both(
            f"history CSV read, {epochs} epochs",
            partial(read_csv_rows, csv_text(rows)),
            partial(read_pandas_rows, csv_text(rows)),
        )
        both(
            f"variants.csv, 3 variants x {epochs} epochs",
            partial(csv_text, [r for h in variants for r in h]),
            partial(pandas_text, variants),
        )
    for points in (12, 200):
        both(
            f"results.csv + page rows, {points} points",
            partial(results_by_hand, *sweep_runs(points)),
            partial(results_pandas, *sweep_runs(points)),
        )
    for count in (20, 200):
        both(
            f"show table, {count} rows",
            partial(show_by_hand, show_cells(count)),
            partial(show_pandas, show_cells(count)),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="pandas' import cost against the table jobs, both ways")
    parser.add_argument("--repeats", type=options.count, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "pandas": pd.__version__,
        "python": sys.version.split()[0],
        "startup_s": startup(args.repeats),
        "jobs": jobs(),
        "loadavg_after": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['cpu']}, {result['cores']} cores, load {result['loadavg'][0]:.2f} -> "
        f"{result['loadavg_after'][0]:.2f}; pandas {result['pandas']}, Python {result['python']}"
    )
    for name, seconds in result["startup_s"].items():
        print(f"  {name:<70} {1000 * seconds:8.1f} ms")
    for name, row in result["jobs"].items():
        print(
            f"  {name:<45} by hand {1e6 * row['by_hand_s']:9.1f} µs   pandas {1e6 * row['pandas_s']:9.1f} µs"
            f"   same text: {row['same_output']}"
        )


if __name__ == "__main__":
    main()
