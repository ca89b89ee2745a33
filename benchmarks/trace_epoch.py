"""Where one `jit_scan` epoch spends its time: a jax.profiler trace, parsed into the per-op table.

    python benchmarks/trace_epoch.py [--top 15] [--keep DIR]
    python benchmarks/trace_epoch.py --examples 512 --top 5    # CI smoke run

The standalone version of the profile stage's op table (src/mnist_jax_pipeline/stages/profile/op_table.py): runs
one warm-up epoch, traces the next (synthetic data of MNIST's shape; the arithmetic does not depend
on the values) and prints every op's count, self time, share of the traced epoch and, for the
matrix products, the achieved GFLOP/s, with the HLO instruction it runs.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax
import numpy as np
from bench_train import bench_params

from mnist_jax_pipeline.mlp.loops.scan_loop import ScanLoop
from mnist_jax_pipeline.stages.profile import op_table, trace_files
from mnist_jax_pipeline.stages.train import initial_state, loop_inputs

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = "Where one `jit_scan` epoch spends its time: a jax.profiler trace, parsed into the per-op table."


def main() -> None:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--top", type=int, default=15, help="rows shown (default: 15)")
    parser.add_argument("--keep", type=Path, help="trace folder (a logdir for XProf; default: a new temporary one)")
    parser.add_argument("--examples", type=int, default=60_000, help="examples per epoch (default: 60000, MNIST's)")
    args = parser.parse_args()
    params = bench_params(batch_size=128, epochs=2)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.examples, 784)).astype(np.float32)
    labels = rng.integers(0, 10, size=args.examples).astype(np.int32)
    inputs = loop_inputs(params, images, labels)
    loop = ScanLoop(inputs)
    held = [initial_state(params, inputs)]
    loop.compile(held[0])

    def epoch(index: int) -> None:
        held[0] = jax.block_until_ready(loop.run_call(held[0], index))

    epoch(0)  # warm-up
    folder = args.keep or Path(tempfile.mkdtemp(prefix="trace-"))
    files = trace_files.record(epoch, range(1, 2), folder, run="jit_scan", python_tracer=True)
    table = op_table.parse(trace_files.load_events(files["perfetto"]), loop.hlo_text())
    print(
        f"one traced jit_scan epoch ({loop.steps_per_call()} steps of batch 128), jax {jax.__version__} on"
        f" {jax.devices()[0].device_kind}:"
    )
    print(op_table.format_table(table, top=args.top))
    print(f"trace files: {folder} (xprof --logdir {folder}; Perfetto: {files['perfetto']})")


if __name__ == "__main__":
    main()
