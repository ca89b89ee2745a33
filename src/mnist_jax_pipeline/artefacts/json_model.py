"""The base of every typed JSON artefact."""

from pydantic import BaseModel, ConfigDict


class JsonModel(BaseModel):
    """A JSON artefact's type: no unknown key (a stale format is caught), finite numbers only."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
