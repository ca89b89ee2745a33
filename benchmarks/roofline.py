"""The limit of a training epoch, measured at the training's own matrix-product shapes.

One training step of the MLP at batch B runs, for each layer of m inputs and n outputs, the
matrix products XLA's compiled step runs (the same operand layouts and contracting dimensions):

    forward       x (B, m) . W (n, m), contracting m     -> (B, n)    2Bmn FLOPs
    weight grad   g (B, n) . x (B, m), contracting B     -> (n, m)    2Bmn FLOPs
    input grad    g (B, n) . W (n, m), contracting n     -> (B, m)    2Bmn FLOPs (not the first layer's:
                                                                        the data needs no gradient)

`StepGemms` times each of them alone on the default device, best of `repeats` calls, with
`block_until_ready()` before every clock read. A call runs the product `inner` times in one
compiled loop (enough for about 2 ms), so the call's dispatch does not count against the small
ones. The limit of an epoch is its steps, full batches and a partial last one, each at the sum of
its products' best times: the epoch's FLOPs at the speeds measured at those shapes. Everything
else the epoch does (the optimizer, activations, the loss) is on top of that limit, so a ratio
epoch / limit below 1 means the reference is wrong, not that the epoch beat it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

INNER_FLOPS = 4e8  # FLOPs one timed call aims at (about 2 ms at 200 GFLOP/s)


@dataclass(frozen=True)
class Gemm:
    """One matrix product of a training step: lhs . rhs, contracting lhs axis `contract[0]` with rhs axis
    `contract[1]`."""

    name: str
    lhs: tuple[int, int]
    rhs: tuple[int, int]
    contract: tuple[int, int]

    @property
    def out(self) -> tuple[int, int]:
        return self.lhs[1 - self.contract[0]], self.rhs[1 - self.contract[1]]

    @property
    def flops(self) -> int:
        return 2 * self.out[0] * self.out[1] * self.lhs[self.contract[0]]


def step_gemms(layer_sizes: Sequence[int], batch: int) -> list[Gemm]:
    """The matrix products of one training step at `batch` rows, layer by layer."""
    gemms = []
    for layer, (m, n) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:], strict=False), start=1):
        gemms.append(Gemm(f"layer {layer} forward", (batch, m), (n, m), (1, 1)))
        gemms.append(Gemm(f"layer {layer} weight grad", (batch, n), (batch, m), (0, 0)))
        if layer > 1:
            gemms.append(Gemm(f"layer {layer} input grad", (batch, n), (n, m), (1, 0)))
    return gemms


def batch_counts(examples: int, batch: int) -> dict[int, int]:
    """{rows: steps} of one epoch: the full batches and a partial last one, as every loop runs them."""
    full, rest = divmod(examples, batch)
    return {rows: steps for rows, steps in ((batch, full), (rest, 1)) if rows and steps}


def epoch_gflop(layer_sizes: Sequence[int], examples: int) -> float:
    """The matrix-product GFLOP of one epoch: forward, weight and input gradients (none for the data)."""
    return sum(g.flops for g in step_gemms(layer_sizes, 1)) * examples / 1e9


def _looped(gemm: Gemm, inner: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """A compiled call that runs `gemm` `inner` times. The optimization barrier keeps XLA from hoisting the
    loop-invariant product out of the loop; the loop body is the product alone (no copy)."""
    dims = (((gemm.contract[0],), (gemm.contract[1],)), ((), ()))

    def run(lhs: jax.Array, rhs: jax.Array) -> jax.Array:
        def body(_: Any, carry: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
            a, b, _out = carry
            a, b = lax.optimization_barrier((a, b))
            return a, b, lax.dot_general(a, b, dims)

        return lax.fori_loop(0, inner, body, (lhs, rhs, jnp.zeros(gemm.out, lhs.dtype)))[2]

    return jax.jit(run)


def best_seconds(call: Callable[[], Any], repeats: int) -> float:
    """The fastest of `repeats` timed calls (one untimed first), `block_until_ready()` before each clock read."""
    jax.block_until_ready(call())
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        best = min(best, time.perf_counter() - start)
    return best


class StepGemms:
    """The training step's products at every batch size of an epoch, compiled once and timed on demand."""

    def __init__(self, layer_sizes: Sequence[int], examples: int, batch: int):
        self.counts = batch_counts(examples, batch)
        key = jax.random.PRNGKey(0)
        self.calls: list[tuple[int, Gemm, int, Callable[[], jax.Array]]] = []
        for rows in self.counts:
            for index, gemm in enumerate(step_gemms(layer_sizes, rows)):
                lhs = jax.random.normal(jax.random.fold_in(key, 2 * index), gemm.lhs, jnp.float32)
                rhs = jax.random.normal(jax.random.fold_in(key, 2 * index + 1), gemm.rhs, jnp.float32)
                inner = max(1, round(INNER_FLOPS / gemm.flops))
                looped = _looped(gemm, inner)
                self.calls.append((rows, gemm, inner, lambda f=looped, a=lhs, b=rhs: f(a, b)))

    def measure(self, repeats: int) -> dict[str, Any]:
        """Every product's best seconds; the epoch limit (seconds) and the step's products at full batch."""
        seconds: dict[int, float] = dict.fromkeys(self.counts, 0.0)
        gemms = []
        for rows, gemm, inner, call in self.calls:
            each = best_seconds(call, repeats) / inner
            seconds[rows] += each
            gemms.append(
                {
                    "name": gemm.name,
                    "rows": rows,
                    "lhs": list(gemm.lhs),
                    "rhs": list(gemm.rhs),
                    "out": list(gemm.out),
                    "gflops": gemm.flops / each / 1e9,
                }
            )
        return {"limit_seconds": sum(steps * seconds[rows] for rows, steps in self.counts.items()), "gemms": gemms}


def large_gemm_gflops(size: int = 2048, repeats: int = 5) -> float:
    """fp32 throughput of one size x size `jnp.dot` (best of `repeats`): a large-GEMM figure, not the limit
    of an epoch whose products are far smaller."""
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (size, size), jnp.float32)
    b = jax.random.normal(jax.random.fold_in(key, 1), (size, size), jnp.float32)
    matmul = jax.jit(jnp.dot)
    return 2 * size**3 / best_seconds(lambda: matmul(a, b), repeats) / 1e9


def cpu_isa() -> dict[str, bool]:
    """The wide vector and matrix units of the host CPU the XLA CPU kernels may use (Linux; else all False)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    flags = set(next((line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")), []))
    return {
        "avx2": "avx2" in flags,
        "fma": "fma" in flags,
        "avx512f": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx": "amx_tile" in flags,
    }


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
