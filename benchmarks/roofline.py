"""The limit of a training epoch, measured at the training's own matrix-product shapes.

One training step of the MLP at batch B runs, for each layer of m inputs and n outputs, the
matrix products XLA's compiled step runs (the same operand layouts and contracting dimensions):

    forward       x (B, m) . W (n, m), contracting m     -> (B, n)    2Bmn FLOPs
    weight grad   g (B, n) . x (B, m), contracting B     -> (n, m)    2Bmn FLOPs
    input grad    g (B, n) . W (n, m), contracting n     -> (B, m)    2Bmn FLOPs (not the first layer's:
                                                                        the data needs no gradient)

`EpochProducts` runs an epoch's products in one compiled call shaped as the jit_scan epoch: a loop
over the full batches, each iteration every product of one step, then the partial last batch's
products once. So the loop's own cost per iteration (on a GPU, a round trip to the host or a kernel
launch per step) is paid once per step, as in the epoch. An optimization barrier per step takes
every operand and the previous step's results, so no product is hoisted out of the loop, merged with
another or dropped as dead. (A step's products do not wait on one another as the epoch's do, so XLA
may overlap them: that only lowers the limit.) The limit is the best of `repeats` calls,
`block_until_ready()` before every clock read. Everything else the epoch does (the optimizer,
activations, the loss, the batch slicing) is on top of that limit, so a ratio epoch / limit below 1
means the reference is wrong, not that the epoch beat it.
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


Pairs = tuple[tuple[jax.Array, jax.Array], ...]  # each product's (lhs, rhs)
Results = tuple[jax.Array, ...]


def _step(gemms: Sequence[Gemm], operands: Pairs, results: Results) -> tuple[Pairs, Results]:
    """One step's products. The operands and the step before's results pass an optimization barrier first, and
    the operands come out of it to be the next step's: no product is loop-invariant (computed once for many
    steps), and every result is used."""
    operands, _ = lax.optimization_barrier((operands, results))
    products = tuple(
        lax.dot_general(lhs, rhs, (((g.contract[0],), (g.contract[1],)), ((), ())))
        for g, (lhs, rhs) in zip(gemms, operands, strict=True)
    )
    return operands, products


def _operands(gemms: Sequence[Gemm], key: jax.Array) -> Pairs:
    """Random float32 operands of every product, each its own arrays (no product shares one with another)."""
    keys = iter(jax.random.split(key, 2 * len(gemms)))
    return tuple((jax.random.normal(next(keys), g.lhs), jax.random.normal(next(keys), g.rhs)) for g in gemms)


class EpochProducts:
    """The epoch's matrix products, step by step in one compiled call, as the jit_scan epoch runs them."""

    def __init__(self, layer_sizes: Sequence[int], examples: int, batch: int):
        full, rest = divmod(examples, batch)
        gemms = step_gemms(layer_sizes, batch), step_gemms(layer_sizes, rest) if rest else []
        key = jax.random.PRNGKey(0)
        self.operands = _operands(gemms[0], key), _operands(gemms[1], jax.random.fold_in(key, 1))

        def epoch(full_operands: Pairs, rest_operands: Pairs) -> tuple[Results, Results]:
            zeros = [tuple(jnp.zeros(g.out, jnp.float32) for g in step) for step in gemms]
            _, last = lax.fori_loop(0, full, lambda _, carry: _step(gemms[0], *carry), (full_operands, zeros[0]))
            return last, _step(gemms[1], rest_operands, zeros[1])[1] if rest else ()

        self.epoch = jax.jit(epoch)

    def hlo_text(self) -> str:
        """The compiled call's optimised HLO."""
        return self.epoch.lower(*self.operands).compile().as_text() or ""

    def measure(self, repeats: int) -> dict[str, Any]:
        """The epoch's limit in seconds: the best of `repeats` timed calls."""
        return {"limit_seconds": best_seconds(lambda: self.epoch(*self.operands), repeats)}


def best_seconds(call: Callable[[], Any], repeats: int) -> float:
    """The fastest of `repeats` timed calls (one untimed first), `block_until_ready()` before each clock read."""
    jax.block_until_ready(call())
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        best = min(best, time.perf_counter() - start)
    return best


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
