"""requirements.py EXTRA: print the pipeline's third-party requirements for one JAX build.

`cpu` is the package's own dependencies (JAX for the CPU); any other value must be an extra of
pyproject.toml that installs JAX (cuda12, cuda13, tpu). Read from pyproject.toml alone, so the image's
dependency layer is rebuilt only when pyproject.toml changes.
"""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).with_name("pyproject.toml")).read_text())["project"]
extras = {name: reqs for name, reqs in project["optional-dependencies"].items()
          if any(req.startswith("jax[") for req in reqs)}
choice = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if choice != "cpu" and choice not in extras:
    sys.exit(f"error: JAX_EXTRA={choice}: use cpu or one of the JAX extras of pyproject.toml: {', '.join(extras)}")
print("\n".join(project["dependencies"] + extras.get(choice, [])))
