"""roc-validator on the crate, offline: the JSON-LD context is served from a copy in this package.

The validator resolves the crate's `@context` (https://w3id.org/ro/crate/1.1/context) over HTTP through
its one requests session (rocrate_validator.utils.http.HttpRequester). Here that session has the HTTP
cache off and a transport adapter mounted that answers the context's URL from
`ro-crate-1.1-context.jsonld` and any other URL with 404, recording it: a validation that asked for a URL
that is not here fails (one line naming it) instead of passing with checks skipped. No request leaves
the machine.

The context file is the published RO-Crate 1.1 context, byte for byte (CC0; as ro-crate-py 0.13 shipped
it in rocrate/data/ro-crate.jsonld; ro-crate-py 0.16, installed here, ships the 1.3 context instead,
whose IRIs for ComputationalWorkflow, FormalParameter, input and output differ from those the 0.5
profiles check). CONTEXT_SHA256 pins it.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.adapters import BaseAdapter

from ...foundation.errors import PipelineError

PROFILE = "provenance-run-crate-0.5"
CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"
CONTEXT_FILE = Path(__file__).with_name("ro-crate-1.1-context.jsonld")
CONTEXT_SHA256 = "bb5dd0a79ebd5a3b074e2faf96f437503234f8a4b8e84c7149de91eae0d2222a"
LOCAL = {CONTEXT_URL: CONTEXT_FILE, CONTEXT_URL.replace("https://", "http://", 1): CONTEXT_FILE}


class LocalOnly(BaseAdapter):
    """A requests transport that serves the known URLs from files and no other."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.url, response.request = str(request.url), request
        file = LOCAL.get(str(request.url).split("#", 1)[0])
        if file is None:
            self.refused.append(str(request.url))
            response.status_code, response.reason = 404, "not available offline"
            response._content = b""
        else:
            response.status_code, response.reason = 200, "OK"
            response.headers["Content-Type"] = "application/ld+json"
            response._content = file.read_bytes()
        return response

    def close(self) -> None:
        pass


DOCS = "docs/provenance.md"  # names each kind of RECOMMENDED finding a crate is left with, and why


@dataclass(frozen=True)
class Outcome:
    required: list[str]  # one line per REQUIRED-level issue
    recommended: dict[str, int]  # RECOMMENDED-level findings: how many of each kind (the check's name)
    optional: int  # OPTIONAL-level findings

    def summary(self) -> str:
        """One line: the count at each level, the RECOMMENDED findings by kind, most first."""
        ranked = sorted(self.recommended.items(), key=lambda item: (-item[1], item[0]))
        kinds = ", ".join(f"{count} x {kind}" for kind, count in ranked)
        return (
            f"crate {'not valid' if self.required else 'valid'} against {PROFILE}: {len(self.required)} REQUIRED,"
            f" {sum(self.recommended.values())} RECOMMENDED{f' ({kinds})' if kinds else ''},"
            f" {self.optional} OPTIONAL; see {DOCS}"
        )


def _line(issue: Any) -> str:
    where = f" ({issue.violatingEntity})" if issue.violatingEntity else ""
    return f"{issue.check.identifier}: {issue.message}{where}".replace("\n", " ")


def validate(metadata: dict[str, Any], crate_root: Path) -> Outcome:
    """Validate the crate's metadata, its files in `crate_root`, against Provenance Run Crate 0.5, every level,
    offline (before the metadata file is written: the command writes it with its outputs, atomic.together())."""
    digest = hashlib.sha256(CONTEXT_FILE.read_bytes()).hexdigest() if CONTEXT_FILE.is_file() else "missing"
    if digest != CONTEXT_SHA256:
        raise PipelineError(
            f"{CONTEXT_FILE}: {'missing' if digest == 'missing' else 'not the RO-Crate 1.1 context'};"
            " restore it from the repository (git checkout -- that file)"
        )
    os.environ.setdefault("ROCRATE_VALIDATOR_AUTO_WARM", "0")  # no network warm-up of the profiles' URLs
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings
    from rocrate_validator.utils.http import HttpRequester

    settings = ValidationSettings(
        rocrate_uri=None,
        metadata_dict=metadata,
        package_root=crate_root.resolve(),
        profile_identifier=PROFILE,
        requirement_severity=Severity.OPTIONAL,
        no_cache=True,
    )
    adapter = LocalOnly()
    session = HttpRequester().session
    for prefix in ("http://", "https://"):
        session.mount(prefix, adapter)
    result = services.validate(settings)
    if adapter.refused:
        raise PipelineError(
            f"{adapter.refused[0]}: the validator needs it and it is not available offline;"
            " the crate was not validated (report it as a bug of mnist-pipeline crate)"
        )
    issues = result.get_issues(Severity.OPTIONAL)
    return Outcome(
        required=sorted({_line(i) for i in issues if i.severity == Severity.REQUIRED}),
        recommended=dict(Counter(i.check.name for i in issues if i.severity == Severity.RECOMMENDED)),
        optional=sum(i.severity == Severity.OPTIONAL for i in issues),
    )
