"""The stages' work, one module or package per stage; a stage reads another's outputs, never its code."""
