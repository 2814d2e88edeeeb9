"""What the installed package ships (pyproject: ``service*``, ``server*``, ``client*``): no code that
exists only for tests. An agent that reads gold labels or knows every phrasing the generator uses is a
test fixture; shipped, it is a script that tops the test board under any name (issue #21.1)."""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

import pytest

from service.env.agents import AGENT_NAMES, make_agent

ROOT = Path(__file__).resolve().parents[2]
TEST_ONLY = ("OracleAgent", "ObservableOracleAgent", "TicketReader", "PhraseBook", "phrasebook", "_PolicyPlayer")


def _shipped_sources() -> list[Path]:
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    return [p for pkg in sorted(packages) for p in (ROOT / pkg).rglob("*.py")]


def _names_defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef)}


def test_the_installed_package_defines_no_test_only_agent_or_reader() -> None:
    found = {
        (str(p.relative_to(ROOT)), name) for p in _shipped_sources() for name in _names_defined(p) & set(TEST_ONLY)
    }
    assert not found, f"test-only code in the installed package: {sorted(found)}"
    assert importlib.util.find_spec("service.env.readers") is None


@pytest.mark.parametrize("name", ["oracle", "observable-oracle"])
def test_the_shipped_agent_factory_knows_only_the_baselines(name: str) -> None:
    assert AGENT_NAMES == ("random", "heuristic")
    with pytest.raises(ValueError, match="unknown agent"):
        make_agent(name, 0, "tk_0")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_neither_the_package_nor_bench_imports_the_tests() -> None:
    """bench/ (the gaming table) and the package stand on their own: the tests build on them, never the
    other way round (import-linter holds the same contract in `make lint`)."""
    sources = _shipped_sources() + sorted((ROOT / "bench").rglob("*.py"))
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m == "tests" or m.startswith("tests."))
        for p in sources
    }
    assert not {k: v for k, v in offenders.items() if v}


def test_the_baseline_endpoint_cannot_be_told_to_serve_an_oracle() -> None:
    from service.settings import Settings

    with pytest.raises(ValueError, match="BASELINE_AGENT must be one of random, heuristic"):
        Settings.from_env({"BASELINE_AGENT": "oracle"})
    assert Settings.from_env({"BASELINE_AGENT": "random"}).baseline_agent == "random"
