"""The comparison commands: `mnist-pipeline compare`, one page of many runs (compare.py), and
`mnist-pipeline show`, DVC's experiments as a table (experiments.py). They read what the stages
wrote; the page is drawn with the report's figures and templates."""
