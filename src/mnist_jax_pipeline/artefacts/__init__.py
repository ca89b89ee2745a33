"""The artefacts the stages hand each other: one typed definition per format, and how each is written."""
