"""roc-validator on the crate, offline: the JSON-LD context is served from a copy in this package; and the checks
of what the profile cannot know (times that are times, in order, and files inside the project).

The validator resolves the crate's `@context` over HTTP through its one requests session; LocalOnly, mounted
there, answers the context's URL from `ro-crate-1.1-context.jsonld` (the published RO-Crate 1.1 context, byte
for byte; ro-crate-py 0.16 ships the 1.3 one, whose IRIs the 0.5 profiles do not check) and any other with 404.
"""

import contextlib
import hashlib
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import requests
from requests.adapters import BaseAdapter

from ...foundation.errors import PipelineError
from .records import untimely

PROFILE = "provenance-run-crate-0.5"
CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"
CONTEXT_FILE = Path(__file__).with_name("ro-crate-1.1-context.jsonld")
CONTEXT_SHA256 = "bb5dd0a79ebd5a3b074e2faf96f437503234f8a4b8e84c7149de91eae0d2222a"
DOCS = "docs/provenance.md"  # names each kind of RECOMMENDED finding a crate is left with, and why


class LocalOnly(BaseAdapter):
    """A requests transport that serves the context's URL (http or https) from CONTEXT_FILE and refuses any
    other, noting it: a validation that needed it fails instead of passing with checks skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.url, response.request = str(request.url), request
        if response.url.split("#", 1)[0].split("://", 1)[-1] == CONTEXT_URL.removeprefix("https://"):
            response.status_code, response._content = 200, CONTEXT_FILE.read_bytes()
            response.headers["Content-Type"] = "application/ld+json"
        else:
            self.refused.append(response.url)
            response.status_code, response.reason, response._content = 404, "not available offline", b""
        return response

    def close(self) -> None:
        """Nothing to release."""


def _line(issue: Any) -> str:
    """A validator's issue on one line: the check, its message, the entity."""
    where = f" ({issue.violatingEntity})" if issue.violatingEntity else ""
    return f"{issue.check.identifier}: {issue.message}{where}".replace("\n", " ")


def untruths(metadata: dict[str, Any], crate_root: Path) -> list[str]:
    """What the profile does not check, a line each: a startTime or endTime that is not an ISO 8601 time with its
    zone, an end before its start, a File that is not a file inside the project (the current folder)."""
    project, found = Path.cwd().absolute(), []
    for entity in metadata["@graph"]:
        name, kinds = entity["@id"], entity["@type"] if isinstance(entity["@type"], list) else [entity["@type"]]
        times = {key: entity[key] for key in ("startTime", "endTime") if key in entity}
        found += [f"{line} ({name})" for line in untimely(times)]
        where = urlsplit(name)
        path = Path(os.path.normpath(crate_root.absolute() / unquote(where.path)))
        if "File" in kinds and (where.scheme or where.netloc or not path.is_relative_to(project)):
            found.append(f"File {name}: not a file inside the project ({project})")
    return [f"mnist-pipeline: {line}" for line in found]


@contextlib.contextmanager
def plain_path(folder: Path) -> Iterator[Path]:
    """`folder`, or a link to it in a new temporary folder when its path needs escaping in a URI: the validator
    takes `file:` and the path, unescaped, as the crate's base URI."""
    if quote(folder.as_posix()) == folder.as_posix():
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="crate-") as temp:
        if quote(temp) != temp:
            raise PipelineError(f"{temp}: the temporary folder's path needs escaping too; set TMPDIR to a plain one")
        (Path(temp) / "crate").symlink_to(folder, target_is_directory=True)
        yield Path(temp) / "crate"


def validate(metadata: dict[str, Any], crate_root: Path, path: Path) -> None:
    """Validate the crate (its files in `crate_root`) against PROFILE offline, before it is written to `path`: print a
    line per REQUIRED issue and one of the counts (RECOMMENDED findings by kind); fail on a REQUIRED issue."""
    if not CONTEXT_FILE.is_file() or hashlib.sha256(CONTEXT_FILE.read_bytes()).hexdigest() != CONTEXT_SHA256:
        raise PipelineError(f"{CONTEXT_FILE}: missing or changed; restore it from git (git checkout -- that file)")
    os.environ.setdefault("ROCRATE_VALIDATOR_AUTO_WARM", "0")  # no network warm-up of the profiles' URLs
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings
    from rocrate_validator.utils.http import HttpRequester

    with plain_path(crate_root.resolve()) as package_root:
        settings = ValidationSettings(
            rocrate_uri=None,
            metadata_dict=metadata,
            package_root=package_root,
            profile_identifier=PROFILE,
            requirement_severity=Severity.OPTIONAL,
            no_cache=True,
        )
        adapter = LocalOnly()  # mounted once the settings have set the session up
        for prefix in ("http://", "https://"):
            HttpRequester().session.mount(prefix, adapter)
        issues = services.validate(settings).get_issues(Severity.OPTIONAL)
    if adapter.refused:
        raise PipelineError(
            f"{adapter.refused[0]}: the validator needs it and it is not available offline;"
            " the crate was not validated (report it as a bug of mnist-pipeline crate)"
        )
    required = sorted({_line(issue) for issue in issues if issue.severity == Severity.REQUIRED})
    required += untruths(metadata, crate_root)
    found = Counter(sorted(i.check.name for i in issues if i.severity == Severity.RECOMMENDED))
    kinds = ", ".join(f"{count} x {kind}" for kind, count in found.most_common())  # most first, ties by name
    for line in required:
        print(f"REQUIRED: {line}")
    print(
        f"crate {'not valid' if required else 'valid'} against {PROFILE}: {len(required)} REQUIRED,"
        f" {found.total()} RECOMMENDED{f' ({kinds})' if kinds else ''},"
        f" {sum(i.severity == Severity.OPTIONAL for i in issues)} OPTIONAL; see {DOCS}"
    )
    if required:
        raise PipelineError(
            f"{path}: not written, it would not conform to {PROFILE} ({len(required)} REQUIRED issues above);"
            " report it as a bug of mnist-pipeline crate"
        )
