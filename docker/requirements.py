"""requirements.py EXTRA [--added]: print the locked requirements, with hashes, of one JAX build.

`cpu` is the package's own dependencies (requirements/runtime.txt, JAX for the CPU); any other
value must be an extra of pyproject.toml that installs JAX (cuda12, cuda13, tpu), whose
requirements/<extra>.txt is the same runtime plus that extra. Both are exports of uv.lock
(tools/update-lock.sh), read here from the image's copy of requirements/, for
`pip install --require-hashes -r`: the image's dependency layers are rebuilt only when they change.
`--added`: only what the build adds to the runtime (nothing for cpu), the image's second layer, so
that every build shares the first (the runtime) and writes only its own packages.
"""

import sys
import tomllib
from pathlib import Path

here = Path(__file__).parent
project = tomllib.loads((here / "pyproject.toml").read_text())["project"]
extras = {
    name: reqs for name, reqs in project["optional-dependencies"].items() if any(req.startswith("jax[") for req in reqs)
}


def entries(text: str) -> list[str]:
    """The requirement entries of an export: a requirement's line with its hash and comment lines."""
    found: list[str] = []
    for line in text.splitlines(keepends=True):
        if line[:1].isspace() and found:
            found[-1] += line
        elif line.strip() and not line.startswith("#"):
            found.append(line)
    return found


args = [arg for arg in sys.argv[1:] if arg != "--added"]
choice = args[0] if args else "cpu"
if choice != "cpu" and choice not in extras:
    sys.exit(f"error: JAX_EXTRA={choice}: use cpu or one of the JAX extras of pyproject.toml: {', '.join(extras)}")
locked = Path("requirements") / ("runtime.txt" if choice == "cpu" else f"{choice}.txt")
if not (here / locked).is_file():
    sys.exit(f"error: JAX_EXTRA={choice}: {locked} is missing; run tools/update-lock.sh")
text = (here / locked).read_text()
if "--added" in sys.argv[1:]:
    runtime = {entry.splitlines()[0] for entry in entries((here / "requirements" / "runtime.txt").read_text())}
    text = "".join(entry for entry in entries(text) if entry.splitlines()[0] not in runtime)
print(text, end="")
