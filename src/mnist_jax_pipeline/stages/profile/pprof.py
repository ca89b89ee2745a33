"""Read JAX device-memory snapshots (pprof `profile.proto`, gzipped) and render them with `pprof`.

The schema is built here from the field numbers of the published
github.com/google/pprof/proto/profile.proto (package `perftools.profiles`), so no generated
code and no `protoc` are needed. Every string in a profile is an index into `string_table`.
A sample's `location_id` lists its stack leaf first; each location's `line` lists inlined
frames innermost first.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from ...artefacts.profile_summary import Allocation, Executables, SnapshotDiff
from ...foundation.errors import missing, remake

log = logging.getLogger(__name__)

PACKAGE = "perftools.profiles"
SAMPLE_TYPES = (("allocations", "count"), ("space", "bytes"))
PPROF_TIMEOUT_S = 120

_F = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_I64, _U64, _STR, _BOOL = _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_STRING, _F.TYPE_BOOL
_MSG = _F.TYPE_MESSAGE

# message -> (field name, number, label, type, message type name or None), from profile.proto.
SCHEMA: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "Profile": [
        ("sample_type", 1, _MANY, _MSG, "ValueType"),
        ("sample", 2, _MANY, _MSG, "Sample"),
        ("mapping", 3, _MANY, _MSG, "Mapping"),
        ("location", 4, _MANY, _MSG, "Location"),
        ("function", 5, _MANY, _MSG, "Function"),
        ("string_table", 6, _MANY, _STR, None),
        ("drop_frames", 7, _ONE, _I64, None),
        ("keep_frames", 8, _ONE, _I64, None),
        ("time_nanos", 9, _ONE, _I64, None),
        ("duration_nanos", 10, _ONE, _I64, None),
        ("period_type", 11, _ONE, _MSG, "ValueType"),
        ("period", 12, _ONE, _I64, None),
        ("comment", 13, _MANY, _I64, None),
        ("default_sample_type", 14, _ONE, _I64, None),
        ("doc_url", 15, _ONE, _I64, None),
    ],
    "ValueType": [("type", 1, _ONE, _I64, None), ("unit", 2, _ONE, _I64, None)],
    "Sample": [
        ("location_id", 1, _MANY, _U64, None),
        ("value", 2, _MANY, _I64, None),
        ("label", 3, _MANY, _MSG, "Label"),
    ],
    "Label": [
        ("key", 1, _ONE, _I64, None),
        ("str", 2, _ONE, _I64, None),
        ("num", 3, _ONE, _I64, None),
        ("num_unit", 4, _ONE, _I64, None),
    ],
    "Mapping": [
        ("id", 1, _ONE, _U64, None),
        ("memory_start", 2, _ONE, _U64, None),
        ("memory_limit", 3, _ONE, _U64, None),
        ("file_offset", 4, _ONE, _U64, None),
        ("filename", 5, _ONE, _I64, None),
        ("build_id", 6, _ONE, _I64, None),
        ("has_functions", 7, _ONE, _BOOL, None),
        ("has_filenames", 8, _ONE, _BOOL, None),
        ("has_line_numbers", 9, _ONE, _BOOL, None),
        ("has_inline_frames", 10, _ONE, _BOOL, None),
    ],
    "Location": [
        ("id", 1, _ONE, _U64, None),
        ("mapping_id", 2, _ONE, _U64, None),
        ("address", 3, _ONE, _U64, None),
        ("line", 4, _MANY, _MSG, "Line"),
        ("is_folded", 5, _ONE, _BOOL, None),
    ],
    "Line": [("function_id", 1, _ONE, _U64, None), ("line", 2, _ONE, _I64, None), ("column", 3, _ONE, _I64, None)],
    "Function": [
        ("id", 1, _ONE, _U64, None),
        ("name", 2, _ONE, _I64, None),
        ("system_name", 3, _ONE, _I64, None),
        ("filename", 4, _ONE, _I64, None),
        ("start_line", 5, _ONE, _I64, None),
    ],
}


@cache
def profile_class() -> type[message.Message]:
    """The `perftools.profiles.Profile` class, built from SCHEMA (proto3: scalars packed)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="mnist_jax_pipeline/pprof_profile.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in SCHEMA.items():
        msg = file.message_type.add(name=name)
        for field, number, label, kind, type_name in fields:
            spec = msg.field.add(name=field, number=number, label=label, type=kind)
            if type_name:
                spec.type_name = f".{PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.Profile"))


class _Corrupt(Exception):
    """A damaged profile; `summarize` adds the file and the stage to re-run."""


def _corrupt(path: Path, why: str) -> _Corrupt:
    return _Corrupt(why)


def parse_profile(path: str | Path, made_by: str = "profile") -> Any:
    """Parse a pprof file (gunzipped first when it starts with the gzip magic)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except FileNotFoundError as err:
        raise missing(path, made_by) from err
    if blob[:2] == b"\x1f\x8b":
        try:
            blob = gzip.decompress(blob)
        except (OSError, EOFError, zlib.error) as err:
            raise remake(path, f"corrupt or truncated gzip ({err})", made_by) from err
    profile = profile_class()()
    try:
        profile.ParseFromString(blob)
    except message.DecodeError as err:
        raise remake(path, f"not a valid pprof profile ({err})", made_by) from err
    return profile


def _strings(path: Path, profile: Any) -> list[str]:
    table = list(profile.string_table)
    if not table or table[0] != "":
        raise _corrupt(path, "string table does not start with the empty string")
    return table


def _text(path: Path, table: list[str], index: int) -> str:
    if not 0 <= index < len(table):
        raise _corrupt(path, f"string index {index} outside the table of {len(table)}")
    return table[index]


def _value_indices(path: Path, profile: Any, table: list[str]) -> tuple[int, int]:
    """Indices of allocations/count and space/bytes among the sample values."""
    types = [(_text(path, table, t.type), _text(path, table, t.unit)) for t in profile.sample_type]
    if any(want not in types for want in SAMPLE_TYPES):
        found = ", ".join(f"{t}/{u}" for t, u in types) or "none"
        raise _corrupt(
            path, f"sample types are {found}, expected allocations/count and space/bytes (a JAX device-memory profile)"
        )
    return types.index(SAMPLE_TYPES[0]), types.index(SAMPLE_TYPES[1])


def _stack(
    path: Path, table: list[str], functions: dict[int, Any], locations: dict[int, Any], location_ids: Any
) -> list[str]:
    """'function file:line' frames, leaf first."""
    frames = []
    for location_id in location_ids:
        location = locations.get(location_id)
        if location is None:
            raise _corrupt(path, f"sample refers to missing location {location_id}")
        for line in location.line:
            function = functions.get(line.function_id)
            if function is None:
                raise _corrupt(path, f"location {location_id} names missing function {line.function_id}")
            name = _text(path, table, function.name)
            frames.append(f"{name} {_text(path, table, function.filename)}:{line.line}")
    return frames


def _labels(path: Path, table: list[str], labels: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in labels:
        key = _text(path, table, label.key)
        out[key] = _text(path, table, label.str) if label.str else int(label.num)
    return out


def origin(stack: list[str]) -> str | None:
    """The innermost frame outside installed packages (the caller's own code), or None."""
    for frame in stack:
        if "site-packages" not in frame and "dist-packages" not in frame and "<frozen" not in frame:
            return frame
    return None


@dataclass(frozen=True)
class Totals:
    """A snapshot's totals, its device buffers (largest first) and its executables in one line."""

    total_bytes: int
    total_allocations: int
    samples: int
    top: list[Allocation]
    executables: Executables | None


def is_executable(row: Allocation) -> bool:
    return row.labels.get("kind") == "executable"


def samples(path: str | Path, made_by: str = "profile") -> list[Allocation]:
    """Every sample of a snapshot: bytes, count, labels, stack (leaf first) and origin (innermost
    frame of the caller's own code). A damaged file is one line naming `made_by`."""
    path = Path(path)
    profile = parse_profile(path, made_by)
    try:
        table = _strings(path, profile)
        count_at, bytes_at = _value_indices(path, profile, table)
        functions = {f.id: f for f in profile.function}
        locations = {loc.id: loc for loc in profile.location}
        rows: list[Allocation] = []
        for sample in profile.sample:
            if len(sample.value) <= max(count_at, bytes_at):
                raise _corrupt(path, f"a sample has {len(sample.value)} values, expected {len(profile.sample_type)}")
            stack = _stack(path, table, functions, locations, sample.location_id)
            rows.append(
                Allocation(
                    bytes=int(sample.value[bytes_at]),
                    count=int(sample.value[count_at]),
                    labels=_labels(path, table, sample.label),
                    stack=stack,
                    origin=origin(stack),
                )
            )
    except _Corrupt as err:
        raise remake(path, str(err), made_by) from err
    return rows


def _largest_first(rows: list[Allocation]) -> list[Allocation]:
    return sorted(rows, key=lambda r: (-abs(r.bytes), -abs(r.count), r.stack))


def summarize(path: str | Path, limit: int | None = None, made_by: str = "profile") -> Totals:
    """Totals of a snapshot, its `limit` largest device buffers and its executables folded into one line."""
    rows = samples(path, made_by)
    executables = [r for r in rows if is_executable(r)]
    buffers = _largest_first([r for r in rows if not is_executable(r)])
    folded = (
        Executables(
            samples=len(executables), count=sum(r.count for r in executables), bytes=sum(r.bytes for r in executables)
        )
        if executables
        else None
    )
    return Totals(
        total_bytes=sum(r.bytes for r in rows),
        total_allocations=sum(r.count for r in rows),
        samples=len(rows),
        top=buffers if limit is None else buffers[:limit],
        executables=folded,
    )


def diff(path: str | Path, base: str | Path, limit: int | None = None, made_by: str = "profile") -> SnapshotDiff:
    """`path` minus `base`, sample by sample (matched on kind, device and stack, as pprof's -diff_base
    matches them): what the later snapshot added, and what it no longer holds (negative)."""

    def key(row: Allocation) -> tuple:
        return (row.labels.get("kind"), row.labels.get("device"), tuple(row.stack))

    now, before = samples(path, made_by), samples(base, made_by)
    change: dict[tuple, list] = {}
    for sign, rows in ((1, now), (-1, before)):
        for row in rows:
            entry = change.setdefault(key(row), [0, 0, row])
            entry[0] += sign * row.bytes
            entry[1] += sign * row.count
    changed = [
        row.model_copy(update={"bytes": b, "count": c})
        for b, c, row in change.values()
        if (b or c) and not is_executable(row)
    ]
    changed = _largest_first(changed)
    return SnapshotDiff(
        base=Path(base).stem,
        total_bytes=sum(r.bytes for r in now) - sum(r.bytes for r in before),
        rows=changed if limit is None else changed[:limit],
    )


def tools() -> dict[str, str | None]:
    """Paths of the `pprof` binary (github.com/google/pprof) and Graphviz `dot`, or None."""
    return {"pprof": shutil.which("pprof"), "dot": shutil.which("dot")}


def _run_pprof(binary: str, args: list[str], home: Path) -> bytes | None:
    env = {**os.environ, "HOME": str(home), "PPROF_TMPDIR": str(home)}
    try:
        done = subprocess.run([binary, *args], capture_output=True, env=env, timeout=PPROF_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("pprof %s failed: %s", " ".join(args), err)
        return None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        log.warning("pprof %s exited %d: %s", " ".join(args), done.returncode, tail[0])
        return None
    return done.stdout


def render(prof: str | Path, out_dir: str | Path, diff_base: str | Path | None = None) -> list[str]:
    """Write `<stem>.top.txt` (pprof -top) and `<stem>.svg` (pprof -svg, needs Graphviz) into `out_dir`,
    and with `diff_base` also `<stem>.diff.top.txt` and `<stem>.diff.svg` (-diff_base: what `prof`
    added to it); return the names written. A missing or failing pprof only logs a warning."""
    prof, out_dir = Path(prof), Path(out_dir)
    found = tools()
    if found["pprof"] is None:
        return []
    views: list[tuple[str, list[str]]] = [("", [])]
    if diff_base is not None:
        views.append((".diff", [f"-diff_base={diff_base}"]))
    outputs = []
    for suffix, extra in views:
        outputs.append((["-top", *extra], f"{prof.stem}{suffix}.top.txt"))
        if found["dot"] is not None:
            outputs.append((["-svg", *extra], f"{prof.stem}{suffix}.svg"))
    written = []
    with tempfile.TemporaryDirectory(prefix="pprof-home-") as home:
        for flags, name in outputs:
            data = _run_pprof(found["pprof"], [*flags, str(prof)], Path(home))
            if data:
                (out_dir / name).write_bytes(data)
                written.append(name)
    return written
