"""The one error type the pipeline reports to users as a single line."""


class PipelineError(Exception):
    """A failure the user can act on: the message names the file or key and the fix."""
