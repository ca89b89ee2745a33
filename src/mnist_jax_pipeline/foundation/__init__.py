"""The foundation every other package stands on: errors, paths, the variants' names, numerics and
determinism (runtime), the console's lines, the dataset's fixed facts and text-file reading. It
imports nothing else of the package."""
