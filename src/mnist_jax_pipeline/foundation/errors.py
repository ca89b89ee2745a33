"""The one error type the pipeline reports to users as a single line."""

CLIP = 80  # characters of a value echoed in a message


class PipelineError(Exception):
    """A failure the user can act on: the message names the file or key and the fix."""


def clip(text: str, limit: int = CLIP) -> str:
    """`text` cut to `limit` characters, with its length, so that a message stays one readable line."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def missing(path: object, made_by: str) -> PipelineError:
    """One line for an artefact that is not there: the file and the stage that makes it."""
    return PipelineError(f"{path}: missing; run the '{made_by}' stage first")


def remake(path: object, what: str, made_by: str) -> PipelineError:
    """One line for an artefact that is there but wrong: the file, what is wrong, the stage that re-makes it."""
    return PipelineError(f"{path}: {what}; re-run the '{made_by}' stage")
