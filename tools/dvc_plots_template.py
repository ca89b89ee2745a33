"""Write .dvc/plots/offline.html: the page `dvc plots show` and `dvc plots diff` fill, with Vega,
Vega-Lite and Vega-Embed inlined, so the plots render on a machine with no network.

    python tools/dvc_plots_template.py            # fetches the pinned builds with `npm pack`
    python tools/dvc_plots_template.py --npm-dir DIR   # or takes them from unpacked tarballs in DIR

DVC fills a template by replacing `{plot_divs}` (required: each plot's <div> and the inline
script that calls vegaEmbed) and `{refresh_tag}`; its `{scripts}` placeholder, where DVC would put
<script src="https://cdn.jsdelivr.net/..."> tags, is left out on purpose. The libraries are
classic scripts, so vega, vegaLite and vegaEmbed exist before the plots' scripts run. DVC's
specs are Vega-Lite 5, hence the majors pinned below. `.dvc/config` names the file
(`dvc config plots.html_template plots/offline.html`, relative to .dvc/).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = "Write .dvc/plots/offline.html: the page DVC's plots fill, with Vega inlined for offline use."

LIBRARIES = (
    ("vega", "5.33.1", "vega.min.js"),
    ("vega-lite", "5.23.0", "vega-lite.min.js"),
    ("vega-embed", "6.29.0", "vega-embed.min.js"),
)
OUTPUT = Path(__file__).resolve().parents[1] / ".dvc" / "plots" / "offline.html"
PLACEHOLDER = re.compile(r"\{(plot_divs|scripts|refresh_tag)\}")
PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
{refresh_tag}
<title>DVC plots</title>
<!-- Written by tools/dvc_plots_template.py: LIBRARIES inlined (BSD-3-Clause, University of
     Washington Interactive Data Lab), so this page asks the network for nothing. -->
SCRIPTS
<style>table { border-spacing: 15px; }</style>
</head>
<body>
{plot_divs}
</body>
</html>
"""


def build(name: str, version: str, folder: Path) -> str:
    """One library's minified build from its npm tarball in `folder` (fetched when absent)."""
    tarball = folder / f"{name}-{version}.tgz"
    if not tarball.is_file():
        subprocess.run(
            ["npm", "pack", "--silent", f"{name}@{version}"], cwd=folder, check=True, stdout=subprocess.DEVNULL
        )
    with tarfile.open(tarball) as archive:
        member = archive.extractfile(f"package/build/{dict((n, f) for n, _, f in LIBRARIES)[name]}")
        assert member is not None
        js = member.read().decode("utf-8")
    js = re.sub(r"//# sourceMappingURL=\S+\s*$", "", js.rstrip())  # no source-map request
    js = js.replace("</script", "<\\/script")  # cannot end the inline <script> early
    if PLACEHOLDER.search(js):
        sys.exit(f"{name}@{version} contains a DVC placeholder; DVC would replace text inside it")
    return f"<script>/* {name}@{version} */\n{js}\n</script>"


NAMES = ", ".join(f"{name}@{version}" for name, version, _ in LIBRARIES)


def fill(scripts: str) -> str:
    """The page with the libraries' inline `scripts` (tests/test_plots_template.py checks the committed page)."""
    return PAGE.replace("LIBRARIES", NAMES).replace("SCRIPTS", scripts)


def main() -> None:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--npm-dir", type=Path, help="a folder holding the npm tarballs (name-version.tgz)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.npm_dir or Path(scratch)
        scripts = "\n".join(build(name, version, folder) for name, version, _ in LIBRARIES)
    page = fill(scripts)
    assert sorted(set(PLACEHOLDER.findall(page))) == ["plot_divs", "refresh_tag"]
    OUTPUT.write_text(page, encoding="utf-8")
    print(f"{OUTPUT}: {len(page.encode()):,} bytes ({NAMES})")


if __name__ == "__main__":
    main()
