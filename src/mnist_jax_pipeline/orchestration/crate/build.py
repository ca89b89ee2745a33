"""The crate itself, with ro-crate-py: Provenance Run Crate 0.5 (https://w3id.org/ro/wfrun/provenance/0.5) on
RO-Crate 1.1, the version its checks are written for, laid out as docs/provenance.md describes: the stage table
as the workflow, a tool and a step per stage, a CreateAction and a ControlAction per recorded job, an
OrganizeAction per tool. Every File has the `sha256` its record gives (records.py left out any job whose files
changed) and its `contentSize`.
"""

import contextlib
import hashlib
import json
import mimetypes
import os
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rocrate.model import ComputerLanguage, ContextEntity, Entity, Person
from rocrate.model.computerlanguage import get_lang
from rocrate.rocrate import ROCrate

from ...artefacts.provenance import Hashes
from ...artefacts.training import RunInfo
from ...foundation import NOT_INSTALLED, paths
from .. import commands, stage_table
from .records import RecordedJob

PROJECT = "mnist-jax-pipeline"  # the project's distribution, as the records' `versions` name it
ENGINES = {"snakemake": "Snakemake", "dvc": "DVC"}  # the tools a record's `run.tool` names: package, name
BY_HAND = "mnist-pipeline"  # the `run.tool` of a job run by hand
PYPI = "https://pypi.org/project/{}/{}/"  # a release's page: the @id and url of a package at a version
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
MEDIA_TYPES = {".npy": "application/x-npy", ".yaml": "application/yaml", ".md": "text/markdown", "": "text/plain"}
PYTHON = {"name": "Python", "url": {"@id": "https://www.python.org"}}  # the stage table's language
WORKFLOW = "src/mnist_jax_pipeline/orchestration/stage_table.py"
RUN_NAME = "Run of the mnist-jax-pipeline workflow"  # in every crate: how --out recognises one of its own
# the run facts the device entity gives, from metrics/train/<variant>.run.json
HOST = ["backend", "device_kind", "device_count", "devices", "cpu_model", "host_cpu_count", "machine", "python_version"]


def _fragment(*parts: str) -> str:
    return "#" + "/".join(quote(part, safe="@=,.-_") for part in parts)


def _times(jobs: list[RecordedJob]) -> dict[str, str]:
    """startTime and endTime, from the first recorded start to the last recorded end, UTC written +00:00 (the form
    the profile checks for); none without a job."""
    if not jobs:
        return {}
    start, end = min(job.record.run.started for job in jobs), max(job.record.run.ended for job in jobs)
    return {"startTime": start.replace("Z", "+00:00"), "endTime": end.replace("Z", "+00:00")}


def recorded_version(jobs: list[RecordedJob], package: str) -> str | None:
    """The version of `package` the jobs recorded, when they agree on one."""
    found = {job.record.versions.get(package) for job in jobs} - {None, NOT_INSTALLED}
    return found.pop() if len(found) == 1 else None


def _license() -> str | None:
    """The project's license as its package metadata states it (pyproject.toml's SPDX expression)."""
    with contextlib.suppress(metadata.PackageNotFoundError):
        found = metadata.metadata(PROJECT).json.get("license_expression")
        return found if isinstance(found, str) else None
    return None


class CrateBuilder:
    """Builds the crate for files named relative to the project root; `out` is the crate's root folder."""

    def __init__(self, jobs: list[RecordedJob], out: Path, hashes: Hashes, user: dict[str, str]):
        self.jobs, self.out, self.hashes = jobs, out, hashes
        self.crate = ROCrate(version="1.1")
        self.crate.metadata.extra_terms.update(EXTRA_TERMS)
        person = Person(self.crate, _fragment("person", user["name"]), properties=user) if user else None
        self.agent = {"agent": self.crate.add(person)} if person else {}  # the properties every action has

    def _context(self, identifier: str, kind: str | list[str], /, **properties: Any) -> Entity:
        """A contextual entity, added once (the first one's properties kept); a property given as None is left out."""
        given = {key: value for key, value in properties.items() if value is not None}
        return self.crate.get(identifier) or self.crate.add(
            ContextEntity(self.crate, identifier, properties={"@type": kind, **given})
        )

    def value(self, identifier: str, name: str, value: str, key: str | None = None) -> Entity:
        """A PropertyValue: a name, its value, and the key it has in its source (`propertyID`), if any."""
        return self._context(identifier, "PropertyValue", name=name, value=value, propertyID=key)

    def _facts(self, name: str, digest: str | None = None) -> dict[str, Any]:
        """A project file's name, digest (`digest`: the record's), size and media type."""
        path = Path(name)
        kind = mimetypes.guess_type(name)[0] or MEDIA_TYPES.get(path.suffix, "application/octet-stream")
        facts = {"name": path.name, "sha256": digest or self.hashes.of(path), "encodingFormat": kind}
        return facts | {"contentSize": str(path.stat().st_size)}

    def _dest(self, name: str) -> str:
        """A project file's path relative to the crate's root (ro-crate-py makes it a URI reference, quoted)."""
        return Path(os.path.relpath(name, self.out)).as_posix()

    def file(self, name: str, digest: str | None = None, **properties: Any) -> Entity:
        """The File entity of a project file, with its digest and size (`digest`: the record's)."""
        return self.crate.get(self._dest(name)) or self.crate.add_file(
            name, dest_path=self._dest(name), properties={**self._facts(name, digest), **properties}
        )

    def files(self, digests: dict[str, str]) -> list[Entity]:
        return [self.file(name, digest) for name, digest in sorted(digests.items())]

    def package(self, package: str, version: str) -> Entity:
        """A package at a version, as released on PyPI: its release page is its @id and url."""
        page, name = PYPI.format(package, version), ENGINES.get(package, package)
        return self._context(page, "SoftwareApplication", name=name, softwareVersion=version, url={"@id": page})

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
            self._context(
                action.id.replace("#run/", "#control/", 1),
                "ControlAction",
                name=f"Orchestrate {job.label}",
                instrument=tools[job.stage.name][1],
                object=action,
                actionStatus=COMPLETED,
            )
            for job, action in zip(self.jobs, actions, strict=True)
        ]
        self.root([run, *actions, *controls, *self.organizers(controls, run, workflow)])
        return self.crate

    def root(self, mentions: list[Entity]) -> None:
        root = self.crate.root_dataset
        root["name"] = "mnist-jax-pipeline: the workspace's last run"
        root["description"] = "The workspace's last run of the MNIST pipeline, sweep points included, from its records."
        if spdx := _license():  # one SPDX identifier as its spdx.org page, an expression of several as text
            page = f"https://spdx.org/licenses/{spdx}"
            root["license"] = spdx if " " in spdx else self._context(page, "CreativeWork", name=spdx, identifier=spdx)
        if Path("README.md").is_file():
            self.file("README.md", about=root)
        root["datePublished"] = _times(self.jobs).get("endTime") or root["datePublished"]
        root["conformsTo"] = [
            self._context(url, "CreativeWork", name=name, version=url.rsplit("/", 1)[-1])
            for url, name in PROFILES.items()
        ]
        root["mentions"] = mentions

    def workflow(self) -> Entity:
        """The stage table, with Snakefile and dvc.yaml as the same workflow in each tool's language."""
        version = recorded_version(self.jobs, PROJECT)
        workflow = self.crate.add_workflow(
            WORKFLOW,
            dest_path=self._dest(WORKFLOW),
            main=True,
            lang=self.crate.add(ComputerLanguage(self.crate, "#python", properties=PYTHON)),
            properties={
                **self._facts(WORKFLOW),
                "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
                "name": "mnist-jax-pipeline stage table",
                "description": "The pipeline's stages, from which Snakemake's rules and dvc.yaml are made",
                **({"version": version} if version else {}),
            },
        )
        dvc_docs = {"@id": "https://dvc.org/doc/user-guide/project-structure/dvcyaml-files"}
        languages = {
            "Snakefile": self.crate.add(get_lang(self.crate, "snakemake")),
            "dvc.yaml": self._context("#dvc", "ComputerLanguage", name="DVC pipeline (dvc.yaml)", url=dvc_docs),
        }
        workflow["subjectOf"] = [
            self.file(name, programmingLanguage=language, isBasedOn=workflow) for name, language in languages.items()
        ]
        return workflow

    def tool(self, stage: stage_table.Stage, position: int) -> tuple[Entity, Entity]:
        """The stage's command (a SoftwareApplication) and its step of the workflow."""
        jobs = [job for job in self.jobs if job.stage == stage]
        packages = {  # what the stage needs: what its jobs recorded, less the project and its tools
            (name, release)
            for job in jobs
            for name, release in job.record.versions.items()
            if name != PROJECT and name not in ENGINES and release != NOT_INSTALLED
        }
        tool = self._context(
            _fragment("tool", stage.name),
            "SoftwareApplication",
            name=stage.cmd("<variant>"),
            description=commands.COMMANDS[stage.name].help,
            softwareVersion=recorded_version(jobs, PROJECT) or None,
        )
        tool["hasPart"] = self.files({name: digest for job in jobs for name, digest in job.record.code.items()})
        if packages:
            tool["softwareRequirements"] = [self.package(name, release) for name, release in sorted(packages)]
        return tool, self._context(
            _fragment("step", stage.name), "HowToStep", name=stage.name, position=str(position), workExample=tool
        )

    def action(self, job: RecordedJob, tool: Entity) -> Entity:
        """The job's CreateAction: its command, its inputs and params, its outputs and record, who ran it."""
        key = [*job.root.parts, job.name]  # '#run/train@jit', '#run/sweeps/<sweep>/<point>/train@jit'
        params = [
            self.value(_fragment("params", *key, name), name, json.dumps(value, sort_keys=True), f"params.yaml#{name}")
            for name, value in sorted(job.record.params.items())
        ]
        record = self.file(job.record_path.as_posix(), description=f"the provenance record of '{job.label}'")
        root = f" --root {job.root.as_posix()}" if job.root != Path(".") else ""
        action = self.crate.add_action(
            tool,
            identifier=_fragment("run", *key),
            object=[*self.files(job.record.inputs), *params],
            result=[*self.files(job.record.outputs), record],
            properties={
                "name": f"Run of {job.label}",
                "actionStatus": COMPLETED,
                "description": job.stage.cmd(job.variant or "") + root,
                **_times([job]),
                **self.agent,
            },
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
        facts = {key: getattr(info, key) for key in HOST} | {"devices": ", ".join(info.devices)}
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
        device = self._context(
            _fragment("device", digest),
            "Product",
            name=f"{info.backend}: {info.device_kind} x{info.device_count} ({info.cpu_model})",
            additionalProperty=[
                self.value(_fragment("device", digest, key), key, str(value))
                for key, value in facts.items()
                if value is not None
            ],
        )
        self.file(path.as_posix())["about"] = device
        values = {"XLA_FLAGS": info.xla_flags, "JAX_DEFAULT_MATMUL_PRECISION": info.matmul_precision}
        action["environment"] = [
            self.value(_fragment("env", name, value), name, value)
            for name, value in values.items()
            if value is not None
        ]

    def workflow_run(self, workflow: Entity, actions: list[Entity]) -> Entity:
        """The whole run: from the first job's start to the last one's end; what no job made, what they made."""
        made = {name: digest for job in self.jobs for name, digest in job.record.outputs.items()}
        read = {name: digest for job in self.jobs for name, digest in job.record.inputs.items() if name not in made}
        return self.crate.add_action(
            workflow,
            identifier="#run",
            object=self.files(read),
            result=self.files(made),
            properties={
                "name": RUN_NAME,
                "description": f"{len(actions)} jobs, from their provenance records",
                **_times(self.jobs),
                **self.agent,
            },
        )

    def organizers(self, controls: list[Entity], run: Entity, workflow: Entity) -> list[Entity]:
        """One OrganizeAction per tool that ran jobs; the jobs run by hand were organized by the person, following the
        stage table: that is their instrument."""
        by_tool: dict[str, list[tuple[RecordedJob, Entity]]] = {}
        for job, control in zip(self.jobs, controls, strict=True):
            by_tool.setdefault(job.record.run.tool, []).append((job, control))
        return [
            self._context(
                _fragment("organize", tool),
                "OrganizeAction",
                name="Jobs run by hand" if tool == BY_HAND else f"Jobs run by {ENGINES.get(tool, tool)}",
                instrument=workflow if tool == BY_HAND else self.engine(tool, [job for job, _ in ran]),
                object=[control for _, control in ran],
                result=run,
                **self.agent,
            )
            for tool, ran in sorted(by_tool.items())
        ]

    def engine(self, tool: str, jobs: list[RecordedJob]) -> Entity:
        """The tool that ran the jobs: the Snakemake or DVC release they recorded."""
        if version := recorded_version(jobs, tool):
            return self.package(tool, version)
        return self._context(_fragment("engine", tool), "SoftwareApplication", name=ENGINES.get(tool, tool))


def build(jobs: list[RecordedJob], out: Path, hashes: Hashes, user: dict[str, str]) -> dict[str, Any]:
    """The crate's metadata (ro-crate-metadata.json's content) for the jobs, rooted at `out`; `user` is the agent's
    name and email, none when empty."""
    generated: dict[str, Any] = CrateBuilder(jobs, out, hashes, user).build().metadata.generate()
    for entity in generated["@graph"]:  # a one-element list as its element, as RO-Crate 1.1's JSON-LD form asks
        entity.update({key: value[0] for key, value in entity.items() if isinstance(value, list) and len(value) == 1})
    return generated
