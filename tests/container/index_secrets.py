#!/usr/bin/env python3
"""Write this host's package-index settings as build secrets for the Dockerfile.

Usage: index_secrets.py OUTDIR  -> writes OUTDIR/{aptsources,aptconf,pipconf,pipcert} (those
that apply) and prints one `--secret id=<id>,src=<file>` pair per line for `podman build` /
`docker build`. The image never keeps them: the Dockerfile reads them from /run/secrets/<id>
during single RUN steps only.

- aptsources: the host's enabled apt sources (one-line or deb822 format, as found).
- aptconf:    the host's non-default `Acquire::*` settings (proxies, Check-Valid-Until...),
              i.e. what it takes to reach the mirror, not the host's hooks.
- pipconf:    the effective pip settings (`pip config list`, files and PIP_* variables) that
              concern reaching an index; local paths and file:// indexes are dropped because
              they do not exist inside the build.
- pipcert:    the CA bundle named by pip's `cert`, rewritten to /run/secrets/pipcert.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PIP_KEYS = {
    "index-url",
    "extra-index-url",
    "trusted-host",
    "cert",
    "client-cert",
    "proxy",
    "timeout",
    "default-timeout",
    "retries",
    "find-links",
    "no-index",
}
EMPTY_APT = 'Dir::Etc::Parts "/nonexistent";\nDir::Etc::main "/nonexistent";\n'


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def apt_sources() -> str:
    parts = []
    main = Path("/etc/apt/sources.list")
    if main.is_file():
        parts.append(main.read_text())
    ext = {p.suffix for p in Path("/etc/apt/sources.list.d").glob("*") if p.suffix in (".list", ".sources")}
    if ".list" in ext and ".sources" in ext:
        # one secret holds one format; deb822 wins (Debian's default since bookworm)
        parts = []
    for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources" if ".sources" in ext else "*.list")):
        parts.append(p.read_text())
    return "\n".join(t.rstrip("\n") + "\n" for t in parts if t.strip())


def apt_conf(tmp: Path) -> str:
    empty = tmp / "apt-empty.conf"
    empty.write_text(EMPTY_APT)
    defaults = set(_run(["apt-config", "dump"], {**os.environ, "APT_CONFIG": str(empty)}).splitlines())
    empty.unlink()
    return "".join(
        line + "\n"
        for line in _run(["apt-config", "dump"]).splitlines()
        if line.startswith("Acquire::") and not line.startswith("Acquire::IndexTargets") and line not in defaults
    )


def _local(value: str) -> bool:
    return value.startswith(("file:", "/", "."))


def pip_conf(outdir: Path) -> tuple[str, bool]:
    settings: dict[str, str] = {}
    listing = _run([sys.executable, "-m", "pip", "config", "list"])
    for line in listing.splitlines():
        key, _, raw = line.partition("=")
        name = key.split(".", 1)[-1]
        if name not in PIP_KEYS:
            continue
        value = ast.literal_eval(raw)
        settings[name] = value  # later sources (env) override files, as pip does
    cert = False
    out = ["[global]"]
    for name, value in sorted(settings.items()):
        if name == "cert":
            src = Path(value)
            if src.is_file():
                (outdir / "pipcert").write_bytes(src.read_bytes())
                out.append("cert = /run/secrets/pipcert")
                cert = True
            continue
        words = [
            w
            for w in value.split()
            if not (_local(w) and name in ("find-links", "extra-index-url", "index-url", "client-cert"))
        ]
        if words:
            out.append(f"{name} = {' '.join(words)}")
    return ("\n".join(out) + "\n" if len(out) > 1 else ""), cert


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    os.chmod(outdir, 0o700)
    for name in ("aptsources", "aptconf", "pipconf", "pipcert"):
        (outdir / name).unlink(missing_ok=True)
    texts = {
        "aptsources": apt_sources() if Path("/etc/apt").is_dir() else "",
        "aptconf": apt_conf(outdir) if Path("/etc/apt").is_dir() else "",
    }
    texts["pipconf"], cert = pip_conf(outdir)
    for name, text in texts.items():
        if text:
            (outdir / name).write_text(text)
    for name in ("aptsources", "aptconf", "pipconf") + (("pipcert",) if cert else ()):
        if (outdir / name).is_file():
            print("--secret")
            print(f"id={name},src={outdir / name}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
