"""Every snippet of README.md and docs/api.md is run (issue 20, item 6), as a user would type it on a
fresh clone: the fenced code blocks, and the curl cookie-jar commands of api.md's client table.

Commands run literally; only what cannot be the same here is changed, and said: the server is a
live one on another port (``localhost:7860`` → its address; ``ENV_URL`` for inference.py, which
the README runs "with `make run` in another shell"), and a temporary folder is the working
directory, with ``.venv`` pointing at this test's virtualenv. A fenced block no test knows fails
:func:`test_every_snippet_is_run_by_a_test`: a new snippet needs its runner.

``make run`` and ``requirements.txt``: ``test_make_run_on_a_fresh_clone_serves_with_only_the_serving_set``
and ``test_requirements_txt_is_the_locks_serving_set``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.harness import STALLED_AFTER_S, free_port
from service.env import TASKS
from tests.client.test_clients_envclient import SNIPPET_SYNC
from tests.client.test_inference import END_RE
from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/api.md")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

STORE_SNIPPET = 'from service.env import Action, reset, step\n\nstate, obs = reset("store-easy"'
# Each fenced block, by its first line, and what runs it.
RUNNERS = {
    "make run    # sets up .venv": "test_make_run_on_a_fresh_clone_serves_with_only_the_serving_set; make test: CI",
    "curl -s -c jar -b jar -X POST localhost:7860/reset": "test_the_readmes_try_it_block_runs_literally",
    "from openenv.core import GenericEnvClient": "tests/client/test_clients_envclient.py (both OpenEnv versions)",
    "uv export --frozen --no-dev --group build": "test_the_lock_install_for_openenv_core_users_works",
    "from service.env import Action, reset, step, grade_episode": "test_the_core_in_process_snippet_runs",
    STORE_SNIPPET: "test_the_store_desk_snippet_runs",
}
NOT_COMMANDS = ("service/env/        the core",)  # the README's layout tree


def fenced(path: str) -> list[tuple[str, str]]:
    return [(lang, code) for lang, code in _FENCE.findall((ROOT / path).read_text())]


def block(first_line: str) -> str:
    for path in DOCS:
        for _, code in fenced(path):
            if code.startswith(first_line):
                return code
    raise AssertionError(f"no snippet starts with {first_line!r}")


def commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments after them dropped."""
    joined = code.replace("\\\n", " ")
    return [re.sub(r"\s+#[^'\"]*$", "", line).strip() for line in joined.splitlines() if line.strip()]


def test_every_snippet_is_run_by_a_test() -> None:
    for path in DOCS:
        for lang, code in fenced(path):
            known = any(code.startswith(k) for k in RUNNERS) or any(code.startswith(k) for k in NOT_COMMANDS)
            assert known, f"{path}: a ```{lang} block no test runs:\n{code[:300]}"
    assert SNIPPET_SYNC.strip() in block("from openenv.core import GenericEnvClient").strip() or (
        block("from openenv.core import GenericEnvClient").strip() in SNIPPET_SYNC
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder to type the commands in: ``.venv`` is this test's virtualenv, the scripts are the checkout's."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    for script in ("inference.py", "baseline.py"):
        (tmp_path / script).symlink_to(ROOT / script)
    return tmp_path


def _shell(command: str, cwd: Path, server: LiveServer, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    typed = command.replace("localhost:7860", f"127.0.0.1:{server.port}")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "API_KEY", "RUN_TOKEN")}
    env.update(ENV_URL=server.url, INFERENCE_STATE_DIR=str(cwd / "runs"), PYTHONPATH=str(ROOT))
    return subprocess.run(["bash", "-c", typed], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_readmes_try_it_block_runs_literally(live_server: LiveServer, workdir: Path) -> None:
    outputs = []
    for command in commands(block("curl -s -c jar -b jar -X POST localhost:7860/reset")):
        proc = _shell(command, workdir, live_server)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        outputs.append(proc.stdout)
    reset, lookup, decide, grade = (json.loads(o) for o in outputs[:4])
    episode = reset["metadata"]["episode_id"]
    assert lookup["observation"]["episode_id"] == decide["observation"]["episode_id"] == episode
    assert decide["done"] is True and 0.0 <= grade["score"] <= 1.0 and grade["episode_id"] == episode
    ends = [m for line in outputs[4].splitlines() if (m := END_RE.match(line))]
    assert len(ends) == 3 * len(TASKS), outputs[4][-2000:]  # 3 tickets of each task


def test_the_cookie_jar_example_of_the_client_table_ends_graded(live_server: LiveServer, workdir: Path) -> None:
    """docs/api.md's curl row: reset, step, grade through a cookie jar (it ended in a 409 before: a
    request_info does not end an episode, and a reset without a task may pick a workflow task)."""
    row = next(line for line in (ROOT / "docs/api.md").read_text().splitlines() if line.startswith("| curl, "))
    typed = [c for c in re.findall(r"`([^`]+)`", row) if c.startswith("curl ")]
    assert len(typed) == 3, row
    outputs = []
    for command in typed:
        proc = _shell(command, workdir, live_server)
        assert proc.returncode == 0, (command, proc.stderr)
        outputs.append(json.loads(proc.stdout))
    assert outputs[1]["done"] is True, outputs[1]
    assert outputs[2].get("status") != 409 and 0.0 <= outputs[2]["score"] <= 1.0, outputs[2]


def test_the_core_in_process_snippet_runs(tmp_path: Path) -> None:
    code = block("from service.env import Action, reset, step, grade_episode")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=STALLED_AFTER_S
    )
    assert proc.returncode == 0, proc.stderr
    reward, done, score = proc.stdout.split()
    assert done == "True" and 0.0 <= float(score) <= 1.0


def test_the_store_desk_snippet_runs() -> None:
    code = block(STORE_SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=STALLED_AFTER_S
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Support request st_") and "'tool': 'search_policy', 'ok': True" in proc.stdout


@pytest.mark.slow
def test_the_lock_install_for_openenv_core_users_works(tmp_path: Path) -> None:
    """The api.md recipe that installs exactly the lock into an environment of one's own (here a fresh
    virtualenv standing for the hackathon's), then serves from it."""
    if shutil.which("uv") is None and not (Path(sys.prefix) / "bin" / "uv").exists():
        pytest.skip("uv is not installed (it is in the test extra)")
    venv = tmp_path / "theirs"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=STALLED_AFTER_S)
    bin_dir = f"{venv / 'bin'}:{Path(sys.prefix) / 'bin'}"  # their pip first; uv from the test extra
    # PIP_NO_COMPILE: pip skips compiling the installed set's bytecode (most of its CPU time here); that
    # the lock installs and serves is what is checked, not how fast its modules import afterwards
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", VIRTUAL_ENV=str(venv), PIP_NO_COMPILE="1")
    recipe = block("uv export --frozen --no-dev --group build").replace("/tmp/req.txt", str(tmp_path / "req.txt"))
    proc = subprocess.run(
        ["bash", "-c", recipe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=STALLED_AFTER_S
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    check = "import service.app, client.cli; print('ok')"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def _fresh_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=STALLED_AFTER_S)
    # the working tree as it is (a test run before a commit checks what will be committed)
    for path in ("Makefile", "requirements.txt", "pyproject.toml", "uv.lock"):
        shutil.copy(ROOT / path, clone / path)
    return clone


@pytest.mark.slow
def test_make_run_on_a_fresh_clone_serves_with_only_the_serving_set(tmp_path: Path) -> None:
    clone = _fresh_clone(tmp_path)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "DATABASE_URL", "PYTHONPATH")}
    env.update(PORT=str(port), HOST="127.0.0.1", LOG_LEVEL="WARNING")
    log = open(tmp_path / "make-run.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["make", "run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 900  # a cold pip cache downloads the serving set
        while True:
            assert proc.poll() is None, (tmp_path / "make-run.log").read_text()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()["status"] == "healthy":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            assert time.monotonic() < deadline, (tmp_path / "make-run.log").read_text()[-3000:]
            time.sleep(0.5)
        reset = httpx.post(
            f"http://127.0.0.1:{port}/reset", json={"task_id": "decision-easy", "seed": 1}, timeout=STALLED_AFTER_S
        )
        assert reset.status_code == 200, reset.text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=STALLED_AFTER_S)
        log.close()
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"litestar", "uvicorn", "sqlalchemy", "httpx", "openai"} <= installed, installed
    assert not installed & {"pytest", "ruff", "mypy", "playwright", "schemathesis", "hypothesis", "openenv", "gradio"}


def test_requirements_txt_is_the_locks_serving_set(tmp_path: Path) -> None:
    """requirements.txt (for `pip install -r requirements.txt`) is what the Dockerfile's `uv export`
    makes from uv.lock, byte for byte but the header's command line: `make requirements` after `uv lock`."""
    uv = Path(sys.prefix) / "bin" / "uv"
    if not uv.exists():
        pytest.skip("uv is not installed (it is in the test extra)")
    dockerfile = (ROOT / "Dockerfile").read_text()
    export = re.search(r"uv export ([^\\\n&]*?)--output-file", dockerfile)
    makefile = (ROOT / "Makefile").read_text()
    assert export is not None and f"uv export {export.group(1)}--output-file requirements.txt" in makefile
    fresh = tmp_path / "requirements.txt"
    subprocess.run(
        [str(uv), "export", *export.group(1).split(), "--output-file", str(fresh)],
        cwd=ROOT,
        check=True,
        timeout=STALLED_AFTER_S,
    )

    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("#    uv export")]

    assert body((ROOT / "requirements.txt").read_text()) == body(fresh.read_text()), "run `make requirements`"


def test_the_makefile_bootstraps_the_same_uv_as_the_test_extra_and_the_dockerfile() -> None:
    pin = re.search(r'"(uv==[\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin is not None
    assert f"UV      = {pin.group(1)}" in (ROOT / "Makefile").read_text()
    assert f'pip install "{pin.group(1)}"' in (ROOT / "Dockerfile").read_text()
