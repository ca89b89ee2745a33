"""The stages' work, one module or package per stage: download, preprocess, train, evaluate, profile
and report. A stage reads another's outputs through artefacts/, never its code."""
