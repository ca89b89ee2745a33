"""The artefacts the stages hand each other: one typed definition per format, used by the stage
that writes it and by every stage that reads it (`storage` holds the atomic writes and checked reads)."""
