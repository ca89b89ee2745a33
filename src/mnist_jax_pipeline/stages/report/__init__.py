"""The report stage: its inputs (inputs.py), figures (figures.py, ticks.py), number formats (formatting.py), the
trace and memory sections (memory.py), the run's conditions (conditions.py) and provenance (provenance.py), and
the HTML/Markdown rendering (render.py, templates/*.j2)."""
