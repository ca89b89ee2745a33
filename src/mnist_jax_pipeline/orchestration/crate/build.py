"""The crate itself, with ro-crate-py: the stage table as the workflow, one CreateAction per recorded job.

Provenance Run Crate 0.5 (https://w3id.org/ro/wfrun/provenance/0.5) on RO-Crate 1.1, the version its
checks are written for. The layout it asks for:

- the main entity is the stage table (stage_table.py), a ComputationalWorkflow and HowTo whose `hasPart` are
  the stages' commands (SoftwareApplications, the tools) and whose `step` are HowToSteps, one per stage,
  each naming its tool (`workExample`); `Snakefile` and `dvc.yaml`, the same workflow in each tool's
  language, are its `subjectOf` (as ro-crate-py links an abstract CWL description);
- each command has the project's version its jobs recorded, the code files they ran as `hasPart` (the
  runtime lock among them; plain Files, parts of the command rather than software of their own) and the
  packages they recorded as `softwareRequirements` (PyPI releases);
- one CreateAction per job: `instrument` the stage's command, `object` its input files and its
  params.yaml sections (PropertyValues, the value a JSON text), `result` its output files and its
  record, start and end time from the record's `run`, `agent` the git user when one is configured;
- a ControlAction per job (the step it ran, the action), an OrganizeAction per tool that ran jobs
  (`instrument`: the Snakemake or DVC release the jobs recorded; for jobs run by hand, the stage table
  itself) and one CreateAction for the whole run;
- the environment: the XLA settings in force as the train action's `environment` (environment
  variables, as the profile has them), and the device, a Product the train run's record
  (metrics/train/<variant>.run.json) is `about`;
- the root: the project's license (its package metadata's SPDX expression); README.md is `about` it.

Every File has `sha256` (from the record, equal to the file's digest now: records.py left out any job
whose files changed) and `contentSize`. Times, tool names and the file's own digest aside, the crate is
the same whichever tool ran the jobs.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rocrate.model import ComputerLanguage, ContextEntity, Entity, Person
from rocrate.model.computerlanguage import get_lang
from rocrate.rocrate import ROCrate

from ...artefacts.provenance import Hashes
from ...artefacts.training import RunInfo
from ...foundation import paths
from .. import commands, stage_table
from .records import RecordedJob

PROJECT = "mnist-jax-pipeline"  # the project's distribution, as the records' `versions` name it
ENGINES = {"snakemake": "Snakemake", "dvc": "DVC"}  # the tools a record's `run.tool` names: package, name
BY_HAND = "mnist-pipeline"  # the `run.tool` of a job run by hand
NOT_INSTALLED = "not installed"  # a record's version of a package it could not find
PYPI = "https://pypi.org/project/{}/{}/"  # a release's page: the @id and url of a package at a version
GIT_TIMEOUT_S = 10
RO_CRATE_VERSION = "1.1"
PROFILES = {  # conformsTo of the root: the profile and the profiles it extends
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
# Terms the RO-Crate 1.1 context lacks, given whole IRIs in the crate's own context (ro-crate-py's extra_terms).
EXTRA_TERMS = {
    "sha256": "http://schema.org/sha256",
    "environment": "https://w3id.org/ro/terms/workflow-run#environment",
}
COMPLETED = "http://schema.org/CompletedActionStatus"  # as text: the profiles compare it with a string
MEDIA_TYPES = {
    ".npy": "application/x-npy",
    ".yaml": "application/yaml",
    ".md": "text/markdown",
    ".py": "text/x-python",
    "Snakefile": "text/plain",
}
WORKFLOW = Path("src/mnist_jax_pipeline/orchestration/stage_table.py")
RUN_NAME = "Run of the mnist-jax-pipeline workflow"  # in every crate: how --out recognises one of its own
DEFINITIONS = {Path("Snakefile"): "snakemake", Path("dvc.yaml"): "dvc"}


def _fragment(*parts: str) -> str:
    return "#" + "/".join(quote(part, safe="@=,.-_") for part in parts)


def _media_type(name: str) -> str:
    path = Path(name)
    return mimetypes.guess_type(name)[0] or MEDIA_TYPES.get(path.suffix or path.name, "application/octet-stream")


def _time(iso: str) -> str:
    """A record's UTC time with its offset written +00:00, the form the profile checks for, instead of Z."""
    return iso.removesuffix("Z") + "+00:00" if iso.endswith("Z") else iso


def _compact(graph: list[dict[str, Any]]) -> None:
    """A one-element list as its element, as RO-Crate 1.1's JSON-LD form asks (ro-crate-py keeps lists as given)."""
    for entity in graph:
        for key, value in entity.items():
            if isinstance(value, list) and len(value) == 1:
                entity[key] = value[0]


def recorded_version(jobs: Iterable[RecordedJob], package: str) -> str | None:
    """The version of `package` the jobs recorded, when they agree on one."""
    found = {job.record.versions.get(package) for job in jobs} - {None, NOT_INSTALLED}
    return found.pop() if len(found) == 1 else None


def requirements(jobs: Iterable[RecordedJob]) -> list[tuple[str, str]]:
    """(package, version) of what the jobs' stage needs: what they recorded, less the project and its tools."""
    return sorted(
        {
            (name, release)
            for job in jobs
            for name, release in job.record.versions.items()
            if name != PROJECT and name not in ENGINES and release != NOT_INSTALLED
        }
    )


def license_expression() -> str | None:
    """The project's license as its package metadata states it (pyproject.toml's SPDX expression)."""
    try:
        found = metadata.metadata(PROJECT).json.get("license_expression")
    except metadata.PackageNotFoundError:
        return None
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class GitUser:
    name: str
    email: str | None


def _config(key: str) -> str | None:
    """One git setting as git resolves it in the current folder; None when unset or without git."""
    try:
        done = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def git_user() -> GitUser | None:
    """The configured git user; None without a user.name (an email alone names no one)."""
    name = _config("user.name")
    return GitUser(name, _config("user.email")) if name else None


class CrateBuilder:
    """Builds the crate for files named relative to the project root; `out` is the crate's root folder."""

    def __init__(self, jobs: list[RecordedJob], out: Path, hashes: Hashes, user: GitUser | None):
        self.jobs, self.out, self.hashes = jobs, out, hashes
        self.crate = ROCrate(version=RO_CRATE_VERSION)
        self.crate.metadata.extra_terms.update(EXTRA_TERMS)
        self.python = self.crate.add(
            ComputerLanguage(
                self.crate, "#python", properties={"name": "Python", "url": {"@id": "https://www.python.org"}}
            )
        )
        self.agent = self.person(user) if user else None

    def _context(self, identifier: str, kind: str | list[str], /, **properties: Any) -> Entity:
        """A contextual entity, added once (the first one's properties kept)."""
        return self.crate.get(identifier) or self.crate.add(
            ContextEntity(self.crate, identifier, properties={"@type": kind, **properties})
        )

    def _id(self, name: str) -> str:
        """A project file's path relative to the crate's root (ro-crate-py makes it a URI reference, quoted)."""
        return Path(os.path.relpath(name, self.out)).as_posix()

    def file(self, name: str, digest: str | None = None, **properties: Any) -> Entity:
        """The File entity of a project file, with its digest and size (`digest`: the record's)."""
        found = self.crate.get(self._id(name))
        if found is not None:
            return found
        return self.crate.add_file(
            name,
            dest_path=self._id(name),
            properties={
                "name": Path(name).name,
                "sha256": digest or self.hashes.of(Path(name)),
                "contentSize": str(Path(name).stat().st_size),
                "encodingFormat": _media_type(name),
                **properties,
            },
        )

    def files(self, digests: dict[str, str]) -> list[Entity]:
        return [self.file(name, digest) for name, digest in sorted(digests.items())]

    def person(self, user: GitUser) -> Entity:
        properties = {"name": user.name} | ({"email": user.email} if user.email else {})
        return self.crate.add(Person(self.crate, _fragment("person", user.name), properties=properties))

    def package(self, package: str, version: str, name: str | None = None) -> Entity:
        """A package at a version, as released on PyPI: its release page is its @id and url."""
        page = PYPI.format(package, version)
        return self._context(
            page, "SoftwareApplication", name=name or package, softwareVersion=version, url={"@id": page}
        )

    def build(self) -> ROCrate:
        workflow = self.workflow()
        # only the stages that ran: the profile wants every tool of the workflow to be some action's instrument
        ran = [stage for stage in stage_table.STAGES if any(job.stage == stage for job in self.jobs)]
        tools = {stage.name: self.tool(stage, i) for i, stage in enumerate(ran, start=1)}
        workflow["hasPart"] = [tool for tool, _ in tools.values()]
        workflow["step"] = [step for _, step in tools.values()]
        actions = [self.action(job, tools[job.stage.name][0]) for job in self.jobs]
        run = self.workflow_run(workflow, actions)
        controls = [
            self.control(job, action, tools[job.stage.name][1]) for job, action in zip(self.jobs, actions, strict=True)
        ]
        organizers = self.organizers(controls, run, workflow)
        self.root(workflow, [run, *actions, *controls, *organizers])
        return self.crate

    def root(self, workflow: Entity, mentions: list[Entity]) -> None:
        root = self.crate.root_dataset
        root["name"] = "mnist-jax-pipeline: the workspace's last run"
        root["description"] = (
            "The MNIST pipeline's last run in this workspace (download, preprocess, train,"
            " evaluate, profile, report, and sweep points), from its provenance records."
        )
        terms = self.license()
        if terms:
            root["license"] = terms
        if Path("README.md").is_file():
            self.file("README.md", about=root)
        root["datePublished"] = self.times(self.jobs).get("endTime") or root["datePublished"]
        profiles = [
            self._context(url, "CreativeWork", name=name, version=url.rsplit("/", 1)[-1])
            for url, name in PROFILES.items()
        ]
        # beside any that add_workflow(main=True) put there
        root["conformsTo"] = [*profiles, *(root.get("conformsTo") or [])]
        root["mentions"] = mentions
        root["mainEntity"] = workflow

    def license(self) -> Entity | str | None:
        """The project's license: one SPDX identifier as its spdx.org page, an expression of several as text."""
        expression = license_expression()
        if not expression or " " in expression:
            return expression
        return self._context(
            f"https://spdx.org/licenses/{expression}", "CreativeWork", name=expression, identifier=expression
        )

    def workflow(self) -> Entity:
        """The stage table, with Snakefile and dvc.yaml as the same workflow in each tool's language."""
        version = recorded_version(self.jobs, PROJECT)
        workflow = self.crate.add_workflow(
            WORKFLOW.as_posix(),
            dest_path=self._id(WORKFLOW.as_posix()),
            main=True,
            lang=self.python,
            properties={
                "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
                "name": "mnist-jax-pipeline stage table",
                "description": "The pipeline's stages: command, params sections, inputs and outputs"
                " (Snakemake's rules and dvc.yaml are made from it)",
                "sha256": self.hashes.of(WORKFLOW),
                "contentSize": str(WORKFLOW.stat().st_size),
                "encodingFormat": _media_type(WORKFLOW.name),
                **({"version": version} if version else {}),
            },
        )
        definitions = []
        for path, lang in DEFINITIONS.items():
            language = (
                self.crate.add(get_lang(self.crate, lang))
                if lang == "snakemake"
                else self._context(
                    "#dvc",
                    "ComputerLanguage",
                    name="DVC pipeline (dvc.yaml)",
                    url={"@id": "https://dvc.org/doc/user-guide/project-structure/dvcyaml-files"},
                )
            )
            definitions.append(self.file(path.as_posix(), programmingLanguage=language, isBasedOn=workflow))
        workflow["subjectOf"] = definitions
        return workflow

    def tool(self, stage: stage_table.Stage, position: int) -> tuple[Entity, Entity]:
        """The stage's command (a SoftwareApplication) and its step of the workflow."""
        jobs = [job for job in self.jobs if job.stage == stage]
        version = recorded_version(jobs, PROJECT)
        tool = self._context(
            _fragment("tool", stage.name),
            "SoftwareApplication",
            name=stage.cmd("<variant>"),
            description=commands.COMMANDS[stage.command].help,
            **({"softwareVersion": version} if version else {}),
        )
        tool["hasPart"] = self.files({name: digest for job in jobs for name, digest in job.record.code.items()})
        packages = requirements(jobs)
        if packages:
            tool["softwareRequirements"] = [self.package(name, release) for name, release in packages]
        step = self._context(
            _fragment("step", stage.name), "HowToStep", name=stage.name, position=str(position), workExample=tool
        )
        return tool, step

    def action(self, job: RecordedJob, tool: Entity) -> Entity:
        """The job's CreateAction: its command, its inputs and params, its outputs and record, who ran it."""
        key = [*job.root.parts, job.record.stage]  # '#run/train@jit', '#run/sweeps/<sweep>/<point>/train@jit'
        params = [
            self._context(
                _fragment("params", *key, section),
                "PropertyValue",
                name=section,
                propertyID=f"params.yaml#{section}",
                value=json.dumps(value, sort_keys=True),
            )
            for section, value in sorted(job.record.params.items())
        ]
        record = self.file(job.record_path.as_posix(), description=f"the provenance record of '{job.label}'")
        properties: dict[str, Any] = {
            "name": f"Run of {job.label}",
            "actionStatus": COMPLETED,
            "description": f"{job.stage.cmd(job.variant or '')}"
            + (f" --root {job.root.as_posix()}" if job.root != Path(".") else ""),
            **self.times([job]),
            **({"agent": self.agent} if self.agent else {}),
        }
        action = self.crate.add_action(
            tool,
            identifier=_fragment("run", *key),
            object=[*self.files(job.record.inputs), *params],
            result=[*self.files(job.record.outputs), record],
            properties=properties,
        )
        if job.stage.name == "train" and job.variant:
            self.device(job, action)
        return action

    def device(self, job: RecordedJob, action: Entity) -> None:
        """The train run's device and XLA settings, from its metrics/train/<variant>.run.json."""
        path = paths.TRAIN_RUN.at(job.variant, job.root)
        if path.as_posix() not in job.record.outputs:
            return
        info = RunInfo.model_validate_json(path.read_bytes())
        facts = {
            "backend": info.backend,
            "device_kind": info.device_kind,
            "device_count": info.device_count,
            "devices": ", ".join(info.devices),
            "cpu_model": info.cpu_model,
            "host_cpu_count": info.host_cpu_count,
            "machine": info.machine,
            "python_version": info.python_version,
        }
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
        device = self._context(
            _fragment("device", digest),
            "Product",
            name=f"{info.backend}: {info.device_kind} x{info.device_count} ({info.cpu_model})",
            additionalProperty=[
                self._context(_fragment("device", digest, key), "PropertyValue", name=key, value=str(value))
                for key, value in facts.items()
                if value is not None
            ],
        )
        self.file(path.as_posix())["about"] = device
        values = {"XLA_FLAGS": info.xla_flags, "JAX_DEFAULT_MATMUL_PRECISION": info.matmul_precision}
        action["environment"] = [
            self._context(_fragment("env", name, value), "PropertyValue", name=name, value=value)
            for name, value in values.items()
            if value is not None
        ]

    def workflow_run(self, workflow: Entity, actions: list[Entity]) -> Entity:
        """The whole run: from the first job's start to the last one's end; what no job made, what they made."""
        made = {name for job in self.jobs for name in job.record.outputs}
        read = {name: digest for job in self.jobs for name, digest in job.record.inputs.items() if name not in made}
        properties: dict[str, Any] = {
            "name": RUN_NAME,
            "description": f"{len(actions)} jobs, from their provenance records",
            **self.times(self.jobs),
            **({"agent": self.agent} if self.agent else {}),
        }
        outputs = sorted({name: d for job in self.jobs for name, d in job.record.outputs.items()}.items())
        return self.crate.add_action(
            workflow,
            identifier="#run",
            object=self.files(read),
            result=[self.file(name, d) for name, d in outputs],
            properties=properties,
        )

    @staticmethod
    def times(jobs: list[RecordedJob]) -> dict[str, str]:
        """startTime and endTime: from the first recorded start to the last recorded end; none without a record."""
        runs = [job.record.run for job in jobs if job.record.run]
        if not runs:
            return {}
        return {"startTime": _time(min(r.started for r in runs)), "endTime": _time(max(r.ended for r in runs))}

    def control(self, job: RecordedJob, action: Entity, step: Entity) -> Entity:
        return self.crate.add(
            ContextEntity(
                self.crate,
                action.id.replace("#run/", "#control/", 1),
                properties={
                    "@type": "ControlAction",
                    "name": f"Orchestrate {job.label}",
                    "instrument": step,
                    "object": action,
                    "actionStatus": COMPLETED,
                },
            )
        )

    def organizers(self, controls: Iterable[Entity], run: Entity, workflow: Entity) -> list[Entity]:
        """One OrganizeAction per tool that ran jobs (a job recorded without its `run` is under none); the jobs run
        by hand were organized by the person, following the stage table: that is their instrument."""
        by_tool: dict[str, list[tuple[RecordedJob, Entity]]] = {}
        for job, control in zip(self.jobs, controls, strict=True):
            if job.record.run:
                by_tool.setdefault(job.record.run.tool, []).append((job, control))
        found = []
        for tool, ran in sorted(by_tool.items()):
            engine = workflow if tool == BY_HAND else self.engine(tool, [job for job, _ in ran])
            members = [control for _, control in ran]
            found.append(
                self.crate.add(
                    ContextEntity(
                        self.crate,
                        _fragment("organize", tool),
                        properties={
                            "@type": "OrganizeAction",
                            "name": "Jobs run by hand" if tool == BY_HAND else f"Jobs run by {engine['name']}",
                            "instrument": engine,
                            "object": members,
                            "result": run,
                            **({"agent": self.agent} if self.agent else {}),
                        },
                    )
                )
            )
        return found

    def engine(self, tool: str, jobs: list[RecordedJob]) -> Entity:
        """The tool that ran the jobs: the Snakemake or DVC release they recorded."""
        name = ENGINES.get(tool, tool)
        version = recorded_version(jobs, tool)
        if version:
            return self.package(tool, version, name)
        return self._context(_fragment("engine", tool), "SoftwareApplication", name=name)


def build(jobs: list[RecordedJob], out: Path, hashes: Hashes, user: GitUser | None) -> dict[str, Any]:
    """The crate's metadata (ro-crate-metadata.json's content) for the jobs, rooted at `out`; `user` is the agent."""
    crate = CrateBuilder(jobs, out, hashes, user).build()
    generated: dict[str, Any] = crate.metadata.generate()
    _compact(generated["@graph"])
    return generated
