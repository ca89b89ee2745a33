"""Whose a path given on the command line is: a command writes only a new path or one it made itself."""

import contextlib
import fnmatch
import subprocess
from pathlib import Path

from ..foundation import paths
from ..foundation.errors import read_bytes

NEVER_WRITTEN = {  # folders no command writes into on a path given on its command line
    ".git": "git's own files",
    ".dvc": "DVC's own files",
    ".snakemake": "Snakemake's own files",
    paths.PROVENANCE: "the provenance records",
}
VARIANT_FOLDERS = {Path(a.path).parent for a in paths.ARTEFACTS if a.per_variant}  # DVC tracks report's inputs whole
SIGNATURE_BYTES = 1 << 24  # how much of a file is searched for the signature of the command that made it


def _tracked(path: Path) -> bool:
    """Whether git tracks `path`, or a file inside it."""
    where = path if path.is_dir() else path.parent
    with contextlib.suppress(OSError):
        done = subprocess.run(["git", "-C", str(where), "ls-files", "--", str(path.resolve())], capture_output=True)
        return done.returncode == 0 and bool(done.stdout)
    return False


def _made_by(target: Path, signature: str, inside: str | None) -> bool:
    """Whether `target` is new (not even a link), an empty folder, or holds `signature` (a folder: in its file
    `inside`); with no signature, a stages' root: a sweep point's, with its params.yaml, or one a stage recorded in."""
    if not (target.exists() or target.is_symlink()) or (target.is_dir() and not any(target.iterdir())):
        return True
    if not signature:
        return any((target / name).exists() for name in (paths.PARAMS, paths.PROVENANCE))
    with contextlib.suppress(OSError):
        return signature.encode() in read_bytes(target / inside if inside else target, SIGNATURE_BYTES)
    return False


def not_ours(target: Path, command: str, signature: str, inside: str | None = None) -> str | None:
    """Why `mnist-pipeline COMMAND` may not write `target`, or None."""
    resolved, here = target.resolve(), Path.cwd().resolve()
    inner = resolved.relative_to(here).parts if resolved.is_relative_to(here) else ()
    inner = inner[3:] if len(inner) > 3 and inner[0] == paths.SWEEPS.name else inner  # a sweep point's, as the root's
    if folder := next((part for part in inner if part in NEVER_WRITTEN), ".git" if ".git" in resolved.parts else None):
        return f"inside {folder}/, {NEVER_WRITTEN[folder]}"
    if target.exists() and _tracked(target):
        return "tracked by git"
    if resolved.name == paths.PARAMS:
        return "a parameters file"
    if shared := next((f for f in VARIANT_FOLDERS if f in Path(*inner).parents), None):
        return f"inside {shared.as_posix()}/, a folder of the stages' per-variant outputs"
    if (owner := owner_of(inner)) is not None:  # its own too: DVC replaces an output folder whole
        return f"an output of the '{owner}' stage"
    if not _made_by(target, signature, inside):
        return f"a {'folder' if target.is_dir() else 'file'} `mnist-pipeline {command}` did not make"
    return None


def owner_of(inner: tuple[str, ...]) -> str | None:
    """The stage whose output (any variant) is, or holds, the project path with these parts; else None."""
    candidates = ["/".join(inner[:end]) for end in range(1, len(inner) + 1)]
    for artefact in paths.ARTEFACTS:
        if any(fnmatch.fnmatchcase(p, artefact.path.replace("{variant}", "*")) for p in candidates):
            return artefact.made_by
    return None
