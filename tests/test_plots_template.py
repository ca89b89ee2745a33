"""`.dvc/plots/offline.html` is what tools/dvc_plots_template.py writes: its page, the libraries inlined."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import dvc_plots_template as template  # noqa: E402


def test_the_committed_page_is_the_tools_page_with_the_libraries_inlined() -> None:
    page = template.OUTPUT.read_text(encoding="utf-8")
    first, last = page.index("<script>"), page.rindex("</script>") + len("</script>")
    scripts = page[first:last]
    assert template.fill(scripts) == page, "run python tools/dvc_plots_template.py: its page changed"
    assert scripts.count("<script>") == len(template.LIBRARIES)
    assert all(f"/* {name}@{version} */" in scripts for name, version, _ in template.LIBRARIES)
    assert sorted(set(template.PLACEHOLDER.findall(page))) == ["plot_divs", "refresh_tag"]
