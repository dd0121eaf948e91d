"""The declared dependencies match the imports: a plain ``pip install odradek`` (no extras) runs everything but the
modules an extra exists for.

Read with ast from every module, imports inside functions included, so a command that imports a package only when
it runs is caught too. Each third-party package a module imports must come from a core dependency, or, for the few
modules that belong to an extra, from that extra; and no module of the core install may import one of those modules.
Packages map to distributions through the installed distributions' own records (``packages_distributions``), so the
test environment (which installs every extra) must have them all.
"""

from __future__ import annotations

import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from .test_import_graph import imported, modules, within

ROOT = Path(__file__).resolve().parents[1]

# Modules that run only where an extra (or the tool loading them) is installed, and which extra that is.
EXTRA_MODULES = {
    "odradek.spark_connector": "spark",  # runs inside Spark
    "odradek.deploy.pytest_plugin": "test",  # loaded by pytest itself, through the pytest11 entry point
    "odradek.proto.generate": "dev",  # `make proto`: regenerates the committed protobuf code with grpc_tools
    # The chaos workloads over the Kafka listener (librdkafka). The runner loads them by name, after checking that
    # confluent-kafka is installed: every other workload runs on a plain install.
    **{
        f"odradek.chaos.{name}": "chaos"
        for name in (
            "kafka_client",
            "kafka_workload",
            "kafka_group_workload",
            "kafka_member",
            "kafka_transactions",
            "kafka_txn_workload",
            "kafka_copy_workload",
            "kafka_share_workload",
            "kafka_share_member",
        )
    },
}


def normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    out = set()
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert match, requirement
        out.add(normalized(match.group(1)))
    return out


@cache
def declared() -> tuple[set[str], dict[str, set[str]]]:
    """The core dependencies and each extra's, as normalized distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {name: requirement_names(reqs) for name, reqs in project["optional-dependencies"].items()}
    return requirement_names(project["dependencies"]), extras


def extra_of(module: str) -> str | None:
    return next((extra for prefix, extra in EXTRA_MODULES.items() if within(module, prefix)), None)


def third_party(names: set[str]) -> set[str]:
    """The top-level names of the imports that are neither odradek's nor the standard library's."""
    tops = {name.split(".")[0] for name in names}
    return {top for top in tops if top and top != "odradek" and top not in sys.stdlib_module_names}


def offences(
    module_imports: dict[str, set[str]],
    core: set[str],
    extras: dict[str, set[str]],
    providers: dict[str, list[str]],
) -> list[str]:
    """What breaks the rule, one line each: a package no allowed distribution provides, or a core module that imports
    a module of an extra."""
    found = []
    for module, names in sorted(module_imports.items()):
        extra = extra_of(module)
        allowed = core | (extras.get(extra, set()) if extra else set())
        for package in sorted(third_party(names)):
            distributions = {normalized(d) for d in providers.get(package, [])}
            if not distributions:
                found.append(f"{module} imports {package}, which no installed distribution provides")
            elif not distributions & allowed:
                where = [name for name, reqs in sorted(extras.items()) if distributions & reqs]
                scope = f"the {extra!r} extra" if extra else "the core install"
                found.append(
                    f"{module} imports {package} ({', '.join(sorted(distributions))}), which {scope} lacks"
                    + (f" (declared in: {', '.join(where)})" if where else " (declared nowhere)")
                )
        if extra is None:
            for name in sorted(names):
                if name in module_imports and extra_of(name) is not None:
                    found.append(f"{module} (core) imports {name}, a module of the {extra_of(name)!r} extra")
    return found


def package_imports() -> dict[str, set[str]]:
    return {name: imported(name, path) for name, path in modules().items()}


def test_every_import_of_the_core_install_is_a_core_dependency() -> None:
    core, extras = declared()
    assert offences(package_imports(), core, extras, packages_distributions()) == []


def test_the_extra_modules_exist_and_their_extras_are_declared() -> None:
    _, extras = declared()
    for prefix, extra in EXTRA_MODULES.items():
        assert prefix in modules(), prefix
        assert extra in extras, extra


def test_the_check_catches_a_core_module_needing_an_extra() -> None:
    """A command module that imports pyspark, or the Spark connector, is reported; the connector itself may."""
    core, extras = declared()
    imports = {
        "odradek.client.cli.spark_cmd": {"pyspark.sql", "odradek.spark_connector.source"},
        "odradek.spark_connector.source": {"pyspark.sql", "pyarrow"},
        "odradek.client.tls_helper": {"cryptography.x509", "not_a_real_package_x"},
    }
    providers = {"pyspark": ["pyspark"], "pyarrow": ["pyarrow"], "cryptography": ["cryptography"]}
    found = offences(imports, core, extras, providers)
    assert any(line.startswith("odradek.client.cli.spark_cmd imports pyspark") and "spark" in line for line in found)
    assert any("spark_cmd (core) imports odradek.spark_connector.source" in line for line in found)
    assert any("not_a_real_package_x, which no installed distribution provides" in line for line in found)
    assert not any(line.startswith("odradek.spark_connector.source") for line in found)
    assert not any("cryptography" in line for line in found)
    without_cryptography = offences(imports, core - {"cryptography"}, extras, providers)
    assert any("cryptography (cryptography), which the core install lacks" in line for line in without_cryptography)


@pytest.mark.parametrize("extra", ["spark", "deploy"])
def test_no_core_dependency_is_only_there_for_an_extra(extra: str) -> None:
    """The heavy extras stay optional: none of their distributions is also a core dependency."""
    core, extras = declared()
    assert core & extras[extra] == set()
