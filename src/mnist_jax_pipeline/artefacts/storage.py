"""Typed JSON, CSV tables and .npy arrays, written atomically (atomic.py) and read back with one-line errors
that name the file and the stage to re-run when it is missing or does not match its type."""

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from ..foundation.errors import missing, read_text, remake
from . import atomic

Model = TypeVar("Model", bound=BaseModel)


def write_json(path: str | Path, data: Any) -> None:
    atomic.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_model(path: str | Path, model: BaseModel) -> None:
    """Write a typed artefact as indented, key-sorted JSON, None fields left out."""
    write_json(path, model.model_dump(mode="json", exclude_none=True))


def _read_text(path: Path, made_by: str) -> str:
    return read_text(path, f"run the '{made_by}' stage first", f"re-run the '{made_by}' stage")


def read_model(path: str | Path, model: type[Model], made_by: str) -> Model:
    """Read a typed JSON artefact; corrupt JSON, or a value that does not match its type, is one line."""
    path = Path(path)
    try:
        return model.model_validate_json(_read_text(path, made_by))
    except ValidationError as err:
        if any(e["type"] == "json_invalid" for e in err.errors()):
            raise remake(path, "corrupt JSON", made_by) from err
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise remake(path, f"'{where}': {first['msg'].lower()}" if where else first["msg"].lower(), made_by) from err


def write_rows(path: str | Path, rows: Sequence[BaseModel], model: type[BaseModel]) -> None:
    """Write typed rows as CSV, one column per field of `model`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(model.model_fields), lineterminator="\n")
    writer.writeheader()
    writer.writerows(row.model_dump(mode="json") for row in rows)
    atomic.write_text(path, out.getvalue())


def read_rows(path: str | Path, model: type[Model], made_by: str) -> list[Model]:
    """Read a CSV of typed rows; a missing column or a bad value names its line."""
    path = Path(path)
    reader = csv.DictReader(_read_text(path, made_by).splitlines())
    if absent := [c for c in model.model_fields if c not in (reader.fieldnames or [])]:
        raise remake(path, f"missing column '{absent[0]}'", made_by)
    rows = []
    for line, row in enumerate(reader, start=2):
        try:
            rows.append(model.model_validate(row, strict=False))
        except ValidationError as err:
            first = err.errors()[0]
            raise remake(path, f"line {line}, column '{first['loc'][0]}': {first['msg'].lower()}", made_by) from err
    return rows


def save_array(path: Path, array: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def load_array(
    path: str | Path, made_by: str, dtype: np.dtype | type | None = None, shape: tuple[int | None, ...] | None = None
) -> np.ndarray:
    """Load a .npy array without pickle, checking its dtype and shape (None: any size)."""
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError as err:
        raise missing(path, made_by) from err
    except (ValueError, OSError, EOFError) as err:
        raise remake(path, f"corrupt or truncated array ({err})", made_by) from err
    if dtype is not None and array.dtype != np.dtype(dtype):
        raise remake(path, f"dtype {array.dtype}, expected {np.dtype(dtype)}", made_by)
    if shape is not None and not (
        array.ndim == len(shape) and all(want in (None, got) for got, want in zip(array.shape, shape, strict=False))
    ):
        raise remake(path, f"shape {array.shape}, expected {shape}", made_by)
    return array
