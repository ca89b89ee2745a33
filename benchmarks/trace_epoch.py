"""Where one `jit_scan` epoch spends its time: a jax.profiler trace, summed per XLA op.

    python benchmarks/trace_epoch.py [--top 15]

Runs one warm-up epoch, traces the next (synthetic data of MNIST's shape; the arithmetic does
not depend on the values), and prints each op's total time with the HLO instruction it runs.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import tempfile
from pathlib import Path

import jax
import numpy as np
from bench_train import bench_params

from mnist_jax_pipeline.loops import ScanLoop
from mnist_jax_pipeline.train import initial_state, loop_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    params = bench_params(batch_size=128, epochs=2)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(60_000, 784)).astype(np.float32)
    labels = rng.integers(0, 10, size=60_000).astype(np.int32)
    inputs = loop_inputs(params, images, labels)
    loop = ScanLoop(inputs)
    state = initial_state(params, inputs)
    loop.compile(state)
    state = jax.block_until_ready(loop.run_epoch(state, 1))

    folder = Path(tempfile.mkdtemp(prefix="trace-"))
    jax.profiler.start_trace(str(folder), create_perfetto_trace=True)
    jax.block_until_ready(loop.run_epoch(state, 2))
    jax.profiler.stop_trace()

    with gzip.open(next(folder.rglob("*perfetto_trace.json.gz"))) as handle:
        trace = json.load(handle)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.get("ph") == "X" and "dur" in event:
            total[event["name"]] += event["dur"]
            count[event["name"]] += 1
    hlo = {m.group(1): m.group(2) for m in re.finditer(r"%(\S+) = (\S+ \w+)", loop.executable.as_text())}
    op_time = sum(micros for name, micros in total.items() if name in hlo) or 1
    print(f"traced epoch: {op_time / 1e3:.1f} ms of XLA ops (profiling adds overhead); ops by total time:")
    for name, micros in total.most_common():
        if name not in hlo:
            continue
        print(f"{micros / 1e3:9.1f} ms {100 * micros / op_time:5.1f}%  x{count[name]:<5d} {name:<28} {hlo[name]}")
        args.top -= 1
        if args.top == 0:
            break
    print(f"trace files: {folder}")


if __name__ == "__main__":
    main()
