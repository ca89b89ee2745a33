"""The one error type the pipeline reports to users as a single line."""

CLIP = 80  # characters of a value echoed in a message


class PipelineError(Exception):
    """A failure the user can act on: the message names the file or key and the fix."""


def clip(text: str, limit: int = CLIP) -> str:
    """`text` cut to `limit` characters, with its length, so that a message stays one readable line."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
