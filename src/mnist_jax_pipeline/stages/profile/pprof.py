"""JAX device-memory snapshots (pprof `profile.proto`, gzipped): their samples, a summary with the
largest buffer explained in model terms, one snapshot less another, and `pprof`'s renderings."""

import itertools
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from ...artefacts.profile_summary import Allocation, Executables, Snapshot, SnapshotDiff, short_frame
from ...foundation.errors import remake
from .trace_files import unzipped

log = logging.getLogger(__name__)

PPROF_TIMEOUT_S = 120
SAMPLE_TYPES = (("allocations", "count"), ("space", "bytes"))
KnownArray = tuple[str, int, str]  # an array a snapshot may hold: (expected_bytes key, bytes, what it is)
Arrays = Sequence[KnownArray]

# The fields read here, numbered as in github.com/google/pprof/proto/profile.proto (the others are
# skipped as unknown): no installed package ships that schema without importing TensorFlow.
SCHEMA = {
    "Profile": [
        ("sample_type", 1, "*ValueType"),
        ("sample", 2, "*Sample"),
        ("location", 4, "*Location"),
        ("function", 5, "*Function"),
        ("string_table", 6, "*string"),
    ],
    "ValueType": [("type", 1, "int64"), ("unit", 2, "int64")],
    "Sample": [("location_id", 1, "*uint64"), ("value", 2, "*int64"), ("label", 3, "*Label")],
    "Label": [("key", 1, "int64"), ("str", 2, "int64"), ("num", 3, "int64")],
    "Location": [("id", 1, "uint64"), ("line", 4, "*Line")],
    "Line": [("function_id", 1, "uint64"), ("line", 2, "int64")],
    "Function": [("id", 1, "uint64"), ("name", 2, "int64"), ("filename", 4, "int64")],
}


@cache
def profile_class() -> type[message.Message]:
    """The `perftools.profiles.Profile` message class, built from SCHEMA ('*': repeated)."""
    kinds = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="pprof_profile.proto", package="perftools.profiles", syntax="proto3")
    for name, fields in SCHEMA.items():
        spec = file.message_type.add(name=name)
        for field, number, kind in fields:
            scalar = getattr(kinds, f"TYPE_{kind.lstrip('*').upper()}", None)  # None: a message of SCHEMA
            label = kinds.LABEL_REPEATED if kind.startswith("*") else kinds.LABEL_OPTIONAL
            nested = None if scalar else f".perftools.profiles.{kind.lstrip('*')}"  # None: left unset
            spec.field.add(name=field, number=number, label=label, type=scalar or kinds.TYPE_MESSAGE, type_name=nested)
    built = descriptor_pool.DescriptorPool().AddSerializedFile(file.SerializeToString())
    return message_factory.GetMessageClass(built.message_types_by_name["Profile"])


def parse_profile(path: Path, made_by: str = "profile") -> Any:
    """The Profile message of a pprof file, gzipped or not; a missing or damaged file is one line naming it."""
    profile = profile_class()()
    try:
        profile.ParseFromString(unzipped(path, made_by))
    except message.DecodeError as err:
        raise remake(path, f"not a valid pprof profile ({err})", made_by) from err
    return profile


def origin(stack: list[str]) -> str | None:
    """The innermost frame outside installed packages (the caller's own code), or None."""
    return next((f for f in stack if not any(s in f for s in ("site-packages", "dist-packages", "<frozen"))), None)


def samples(path: Path, made_by: str = "profile") -> list[Allocation]:
    """Every sample of a snapshot: bytes, count, labels, stack ('function file:line', leaf first) and
    origin. A damaged file is one line naming it and `made_by`."""
    profile = parse_profile(path, made_by)
    text = list(profile.string_table)  # every string in a profile is an index into this table
    try:
        types = [(text[t.type], text[t.unit]) for t in profile.sample_type]
        if not set(SAMPLE_TYPES) <= set(types):
            found = ", ".join(f"{t}/{u}" for t, u in types) or "none"
            expected = "expected allocations/count and space/bytes (a JAX device-memory profile)"
            raise remake(path, f"sample types are {found}, {expected}", made_by)
        count_at, bytes_at = (types.index(t) for t in SAMPLE_TYPES)
        frames = {f.id: f"{text[f.name]} {text[f.filename]}" for f in profile.function}
        lines = {loc.id: loc.line for loc in profile.location}  # by location: its frames' lines, innermost first
        rows = []
        for sample in profile.sample:
            stack = [f"{frames[line.function_id]}:{line.line}" for i in sample.location_id for line in lines[i]]
            labels = {text[la.key]: text[la.str] if la.str else int(la.num) for la in sample.label}
            size, count = int(sample.value[bytes_at]), int(sample.value[count_at])
            rows.append(Allocation(bytes=size, count=count, labels=labels, stack=stack, origin=origin(stack)))
    except (KeyError, IndexError) as err:  # a location, function, string or value the profile lacks
        raise remake(path, f"a sample refers to what the profile lacks ({type(err).__name__} {err})", made_by) from err
    return rows


def _buffers(rows: list[Allocation]) -> list[Allocation]:
    """The rows other than compiled executables, largest first."""
    kept = [r for r in rows if r.labels.get("kind") != "executable"]
    return sorted(kept, key=lambda r: (-abs(r.bytes), -abs(r.count), r.stack))


def _match(row: Allocation, arrays: Arrays) -> str | None:
    """The arrays whose sizes add up to the sample's bytes, as many as its count (at most 4)."""
    if not 1 <= row.count <= 4:
        return None
    for combo in itertools.combinations_with_replacement(arrays, row.count):
        if sum(size for _, size, _ in combo) == row.bytes:
            names = [text for _, _, text in combo]
            return " + ".join(t if names.count(t) == 1 else f"{names.count(t)} x {t}" for t in dict.fromkeys(names))
    return None


def explain(top: Allocation | None, total: int, arrays: Arrays) -> str:
    """One sentence relating a snapshot's largest buffer to the model and data arrays."""
    if top is None or top.bytes == 0:
        return "No device buffers were live."
    share = f"{top.bytes / total:.0%} of the {total:,} bytes live"
    kind = top.labels.get("kind", "allocation")
    where = f", allocated in {short_frame(top.origin)}," if top.origin else ""
    if (what := _match(top, arrays)) is None:
        each = top.bytes // max(top.count, 1)
        return f"The largest {kind}, {top.count} x {each:,} bytes{where} matches no model or data array ({share})."
    return f"The largest {kind}, {top.bytes:,} bytes{where} is {what} ({share})."


def diff(now: list[Allocation], before: list[Allocation], base: str, limit: int | None = None) -> SnapshotDiff:
    """`now` less `before`, sample by sample (matched on kind, device and stack, as pprof's -diff_base
    matches them): what was added, and what is no longer held (negative)."""
    change: dict[tuple, list] = {}
    for sign, rows in ((1, now), (-1, before)):
        for row in rows:
            entry = change.setdefault((row.labels.get("kind"), row.labels.get("device"), tuple(row.stack)), [0, 0, row])
            entry[0] += sign * row.bytes
            entry[1] += sign * row.count
    changed = _buffers([row.model_copy(update={"bytes": b, "count": c}) for b, c, row in change.values() if b or c])
    total = sum(r.bytes for r in now) - sum(r.bytes for r in before)
    return SnapshotDiff(base=base, total_bytes=total, rows=changed[:limit])


def summarize(
    path: Path, limit: int | None = None, made_by: str = "profile", arrays: Arrays = (), base: Path | None = None
) -> Snapshot:
    """A snapshot's totals, its `limit` largest device buffers (the largest explained by `arrays`), its
    executables in one line and, with `base`, what it added to that earlier snapshot."""
    rows = samples(path, made_by)
    buffers = _buffers(rows)
    executables = [r for r in rows if r.labels.get("kind") == "executable"]
    folded = Executables(
        samples=len(executables), count=sum(r.count for r in executables), bytes=sum(r.bytes for r in executables)
    )
    total = sum(r.bytes for r in rows)
    return Snapshot(
        file=path.name,
        total_bytes=total,
        total_allocations=sum(r.count for r in rows),
        samples=len(rows),
        explanation=explain(buffers[0] if buffers else None, total, arrays),
        top=buffers[:limit],
        executables=folded if executables else None,
        diff=diff(rows, samples(base, made_by), base.stem, limit) if base else None,
    )


def tools() -> dict[str, str | None]:
    """Paths of the `pprof` binary (github.com/google/pprof) and Graphviz `dot`, or None, as PprofTools names them."""
    return {"binary": shutil.which("pprof"), "dot": shutil.which("dot")}


def render(prof: str | Path, out_dir: str | Path, diff_base: str | Path | None = None) -> list[str]:
    """Write `<stem>.top.txt` (pprof -top) and `<stem>.svg` (-svg, with Graphviz) into `out_dir`, with
    `diff_base` also `<stem>.diff.*` (what `prof` added to it); the names written. A failing pprof only warns."""
    prof, found = Path(prof), tools()
    if found["binary"] is None:
        return []
    views: list[tuple[str, list[str]]] = [("", [])] + ([(".diff", [f"-diff_base={diff_base}"])] if diff_base else [])
    written = []
    with tempfile.TemporaryDirectory(prefix="pprof-home-") as home:
        for (suffix, extra), fmt in itertools.product(views, ["top", "svg"] if found["dot"] else ["top"]):
            name = f"{prof.stem}{suffix}.{'top.txt' if fmt == 'top' else fmt}"
            command = [found["binary"], f"-{fmt}", *extra, str(prof)]
            env = {**os.environ, "HOME": home, "PPROF_TMPDIR": home}
            try:
                done = subprocess.run(command, capture_output=True, env=env, timeout=PPROF_TIMEOUT_S, check=True)
            except (OSError, subprocess.SubprocessError) as err:
                stderr = (getattr(err, "stderr", None) or b"").decode(errors="replace").strip().splitlines()
                log.warning("%s failed: %s", " ".join(command), stderr[-1] if stderr else err)
                continue
            if done.stdout:
                (Path(out_dir) / name).write_bytes(done.stdout)
                written.append(name)
    return written
