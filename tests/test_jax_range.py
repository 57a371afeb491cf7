"""The supported JAX range is stated once and enforced, and the one adapter to JAX's internals finds every name
in the JAX that runs (scripts/jax-range proves both ends of the range in CI)."""

from __future__ import annotations

import importlib
import sys
import tomllib

import pytest

from grader.common import jax_range
from tests.case_expectations import ROOT

CHILD = ROOT / "grader" / "sandbox" / "child"


def test_pyproject_states_the_same_range():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for package in ("jax", "jaxlib"):
        assert f"{package}{jax_range.PIP_RANGE}" in dependencies


def test_release_reads_versions():
    assert jax_range.release("0.12.0.1") == (0, 12, 0, 1)
    assert jax_range.release("0.13.0rc1") == (0, 13)
    assert (0, 9, 2) <= jax_range.release("0.9.2") < jax_range.BELOW
    assert not jax_range.release("0.13.0") < jax_range.BELOW


def test_the_installed_jax_is_supported():
    assert jax_range.unsupported() is None


@pytest.mark.parametrize("version", ["0.13.0", "0.9.1", None])
def test_a_jax_outside_the_range_is_refused_in_one_sentence(monkeypatch, version):
    monkeypatch.setattr(jax_range, "installed_version", lambda package: version)
    instructor = jax_range.unsupported()
    student = jax_range.unsupported(student=True)
    assert instructor is not None and "supports JAX >=0.9.2,<0.13" in instructor and "pip install" not in instructor
    assert student is not None and 'python -m pip install "jax>=0.9.2,<0.13"' in student


@pytest.fixture
def jax_internals(monkeypatch):
    monkeypatch.syspath_prepend(str(CHILD))
    sys.modules.pop("jax_internals", None)
    return importlib.import_module("jax_internals")


def test_every_internal_is_found_in_this_jax(jax_internals):
    assert jax_internals.version_known()
    for name in jax_internals.LOCATIONS:
        assert jax_internals.find(name) is not None, name


def test_a_name_found_nowhere_fails_naming_the_jax(jax_internals, monkeypatch):
    monkeypatch.setitem(jax_internals.LOCATIONS, "gone", ("jax._src.core:no_such_name", "no.such.module:thing"))
    with pytest.raises(jax_internals.JaxInternalMissing, match="has no gone .*the grader knows JAX 0.9"):
        jax_internals.find("gone")
