"""The report stage: figures (figures.py), inputs (inputs.py), memory (memory.py), provenance
(provenance.py) and the HTML/Markdown rendering (render.py, templates/*.j2)."""
