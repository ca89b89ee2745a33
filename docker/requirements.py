"""requirements.py EXTRA: print the locked requirements, with hashes, of one JAX build.

`cpu` is the package's own dependencies (requirements/runtime.txt, JAX for the CPU); any other
value must be an extra of pyproject.toml that installs JAX (cuda12, cuda13, tpu), whose
requirements/<extra>.txt is the same runtime plus that extra. Both are exports of uv.lock
(tools/update-lock.sh), read here from the image's copy of requirements/, for
`pip install --require-hashes -r`: the image's dependency layer is rebuilt only when they change.
"""

import sys
import tomllib
from pathlib import Path

here = Path(__file__).parent
project = tomllib.loads((here / "pyproject.toml").read_text())["project"]
extras = {
    name: reqs for name, reqs in project["optional-dependencies"].items() if any(req.startswith("jax[") for req in reqs)
}
choice = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if choice != "cpu" and choice not in extras:
    sys.exit(f"error: JAX_EXTRA={choice}: use cpu or one of the JAX extras of pyproject.toml: {', '.join(extras)}")
locked = Path("requirements") / ("runtime.txt" if choice == "cpu" else f"{choice}.txt")
if not (here / locked).is_file():
    sys.exit(f"error: JAX_EXTRA={choice}: {locked} is missing; run tools/update-lock.sh")
print((here / locked).read_text(), end="")
