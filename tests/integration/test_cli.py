"""The ``pagesight`` command line's contract (README, "Command line"), command by command, in
both modes: the local index (``PAGESIGHT_DATA_DIR``) and a gateway (``--server URL --api-key
KEY``) served by uvicorn in this process over a real index service, called over real HTTP.

What every test holds the CLI to: results on stdout (text, or one JSON document of the
documented shape with ``--json``), progress and errors on stderr; a failure is one line
``stage/CODE: message``, never a traceback; exit codes 0 done, 1 failed, 2 usage error,
3 partly failed.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
import traceback
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pymupdf
import pytest
from typer.testing import CliRunner, Result

from pagesight.core.errors import PageSightError
from pagesight.core.settings import GatewayOptions, Settings, VisualEmbedderOptions
from pagesight.core.types import (
    AnswerResponse,
    AnswerSentence,
    AnswerUnit,
    BBox,
    Citation,
    Document,
    JobState,
    JobStatus,
    QuotePart,
)
from pagesight.entrypoints import cli as cli_module
from pagesight.entrypoints.cli import _job_line, app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.ingestion import samples
from pagesight.store.catalog import Catalog
from pagesight.store.key_stores import FileKeyStore
from tests.asgi_server import free_port, serving
from tests.serving import gateway_app, warm_service

pytestmark = pytest.mark.integration

RUNNER = CliRunner()

#: Whatever the developer's shell holds, the CLI sees only what a test gives it.
CLEAN_ENV: dict[str, str | None] = {
    "PAGESIGHT_DATA_DIR": None,
    "PAGESIGHT_SERVER_URL": None,
    "PAGESIGHT_API_KEY": None,
    "PAGESIGHT_DEBUG": None,
    "PAGESIGHT_GATEWAY__API_KEYS": None,
    "PAGESIGHT_GATEWAY__API_KEYS_FILE": None,
    "PAGESIGHT_DATABASE_URL": None,
    # no page model: the visual route is unavailable whatever is on this machine
    "PAGESIGHT_VISUAL__ENABLED": "false",
}

ERROR_LINE = re.compile(r"^(?P<stage>[a-z]+)/(?P<code>[A-Z_]+): \S")

#: A job as README documents it (the API's GET /v1/jobs/{id}; never a storage path).
JOB_KEYS = {
    "job_id",
    "tenant",
    "source_uri",
    "doc_id",
    "version",
    "acl",
    "valid_until",
    "state",
    "error_code",
    "error_stage",
    "error_message",
    "warnings",
    "pages",
    "chunks",
    "unchanged",
    "attempts",
    "created_at",
    "updated_at",
    "document_state",
}
SEARCH_KEYS = {"trace_id", "route", "hits", "elapsed_ms"}
HIT_KEYS = {
    "doc_id",
    "page_number",
    "rank",
    "score",
    "route_scores",
    "snippet",
    "title",
    "source_uri",
    "source_name",
    "kinds",
    "chunk_ids",
    "element_ids",
    "evidence",
    "page_image_url",
}

# One tenant per remote test: the module's server is shared, the tests stay independent.
TENANTS = (
    "t-ingest",
    "t-password",
    "t-replace",
    "t-jobs",
    "t-delete",
    "t-search",
    "t-answer",
    "t-errors",
)
KEYS = {tenant: new_key(f"key-{tenant}", tenant) for tenant in TENANTS}


# -- running the CLI ------------------------------------------------------------------------


def cli(args: Sequence[str | Path], env: Mapping[str, str | None] | None = None) -> Result:
    """Run ``pagesight ARGS``: every exit is a clean one (no exception escapes the CLI, no
    traceback in its output)."""
    result = RUNNER.invoke(app, [str(a) for a in args], env={**CLEAN_ENV, **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        pytest.fail("".join(traceback.format_exception(*result.exc_info)))
    for text in (result.output, result.stdout, result.stderr):
        assert "Traceback" not in text, text
    return result


def one_error(result: Result, code: str, stage: str | None = None) -> str:
    """A failed command's output: exit 1, nothing on stdout, one ``stage/CODE: message`` line
    on stderr."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    match = ERROR_LINE.match(lines[0])
    assert match, lines[0]
    assert match["code"] == code, lines[0]
    if stage is not None:
        assert match["stage"] == stage, lines[0]
    return lines[0]


def usage_error(result: Result, option: str) -> None:
    """Click's usage error: exit 2, its message on stderr naming the option, nothing done."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    assert option in result.stderr, result.stderr


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def job_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def check_job(job: dict[str, Any]) -> JobStatus:
    """A job of the documented shape: exactly the API's fields, no storage path."""
    assert set(job) == JOB_KEYS, sorted(set(job) ^ JOB_KEYS)
    return JobStatus.model_validate(job)


# -- files ----------------------------------------------------------------------------------


@dataclass
class Files:
    report: Path
    table: Path
    chart: Path
    garbage: Path  # random bytes named .pdf
    archive: Path  # a zip
    empty_dir: Path


@pytest.fixture()
def files(tmp_path: Path) -> Files:
    folder = tmp_path / "in"
    folder.mkdir()
    garbage = folder / "garbage.pdf"
    garbage.write_bytes(random.Random(7).randbytes(4096))  # noqa: S311  # junk bytes, not a secret
    archive = folder / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("notes.txt", "not a document PageSight reads")
    empty = tmp_path / "empty"
    empty.mkdir()
    return Files(
        report=samples.text_pdf(folder / "report.pdf"),
        table=samples.table_pdf(folder / "table.pdf"),
        chart=samples.chart_pdf(folder / "chart.pdf"),
        garbage=garbage,
        archive=archive,
        empty_dir=empty,
    )


def encrypted_pdf(path: Path, password: str) -> Path:
    plain = samples.text_pdf(path.with_name(f"plain-{path.name}"))
    with pymupdf.open(plain) as doc:
        doc.save(
            path,
            encryption=pymupdf.PDF_ENCRYPT_AES_256,  # type: ignore[attr-defined]
            user_pw=password,
            owner_pw=password,
        )
    plain.unlink()
    return path


@pytest.fixture()
def local(tmp_path: Path) -> dict[str, str | None]:
    """The environment of local mode: an empty data directory of this test's own."""
    return {"PAGESIGHT_DATA_DIR": str(tmp_path / "var")}


# -- the gateway, served over HTTP in this process --------------------------------------------


@dataclass
class Remote:
    url: str
    keys_file: Path
    data_dir: Path

    def args(self, tenant: str) -> list[str]:
        return ["--server", self.url, "--api-key", KEYS[tenant][0]]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    root = tmp_path_factory.mktemp("cli-remote")
    keys_file = root / "api-keys.json"
    FileKeyStore(keys_file).add(new_key("key-file-seed", "t-file")[1])
    settings = Settings(
        data_dir=root / "var",
        visual=VisualEmbedderOptions(enabled=False),
        gateway=GatewayOptions(
            api_keys=[record for _, record in KEYS.values()],
            api_keys_file=keys_file,
            keys_reload_s=0,  # `pagesight keys new/revoke` count at the next request
        ),
    )
    with warm_service(settings) as service, serving(gateway_app(service)) as url:
        yield Remote(url, keys_file, settings.data_dir)


# -- parse ----------------------------------------------------------------------------------


def test_parse_prints_elements_per_page(files: Files, local: dict[str, str | None]) -> None:
    result = cli(["parse", files.report], local)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert "Northwind Logistics Annual Report  1 pages  doc_id=" in result.stdout
    assert "page 1 (text layer, " in result.stdout
    assert "title " in result.stdout


def test_parse_json_is_a_list_of_documents_with_chunks(
    files: Files, local: dict[str, str | None]
) -> None:
    result = cli(["parse", files.report, files.table, files.chart, "--json"], local)
    assert result.exit_code == 0, result.output
    parsed = as_json(result)
    assert isinstance(parsed, list) and len(parsed) == 3
    for entry, path in zip(parsed, (files.report, files.table, files.chart), strict=True):
        assert {"file", "document", "pages", "elements", "warnings", "chunks"} <= set(entry)
        assert entry["file"] == str(path)
        assert entry["document"]["page_count"] == 1
        assert entry["elements"] and entry["chunks"]
        assert all(c["doc_id"] == entry["document"]["doc_id"] for c in entry["chunks"])
    assert "table" in {e["kind"] for e in parsed[1]["elements"]}


@pytest.mark.parametrize("bad", ["garbage", "archive"])
def test_parse_of_a_bad_file_fails_with_one_line(
    files: Files, local: dict[str, str | None], bad: str
) -> None:
    path: Path = getattr(files, bad)
    result = cli(["parse", path], local)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{path}: input/UNSUPPORTED_FORMAT: "), lines[0]


def test_parse_of_one_good_and_one_bad_file_is_partial(
    files: Files, local: dict[str, str | None]
) -> None:
    result = cli(["parse", files.report, files.garbage], local)
    assert result.exit_code == 3, result.output
    assert "Northwind Logistics Annual Report" in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{files.garbage}: input/UNSUPPORTED_FORMAT: "), line

    result = cli(["parse", files.garbage, files.report, "--json"], local)
    assert result.exit_code == 3, result.output
    failed, good = as_json(result)
    assert failed["file"] == str(files.garbage)
    assert set(failed["error"]) == {"code", "stage", "message"}
    assert (failed["error"]["stage"], failed["error"]["code"]) == ("input", "UNSUPPORTED_FORMAT")
    assert good["file"] == str(files.report) and good["chunks"]


def test_parse_password_and_missing_file(
    files: Files, local: dict[str, str | None], tmp_path: Path
) -> None:
    locked = encrypted_pdf(tmp_path / "locked.pdf", "s3cret-pw")
    for password in ([], ["--password", "wrong"]):
        result = cli(["parse", locked, *password], local)
        assert result.exit_code == 1, result.output
        assert result.stdout == ""
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"{locked}: render/ENCRYPTED: "), line
    result = cli(["parse", locked, "--password", "s3cret-pw"], local)
    assert result.exit_code == 0, result.output
    assert "Northwind Logistics Annual Report" in result.stdout

    missing = tmp_path / "missing.pdf"
    result = cli(["parse", missing, files.report], local)
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{missing}: input/NOT_FOUND: "), line


# -- ingest ---------------------------------------------------------------------------------


def test_ingest_local_prints_a_line_per_file_and_skips_unchanged_files(
    files: Files, local: dict[str, str | None]
) -> None:
    result = cli(["ingest", files.report, files.table], local)
    assert result.exit_code == 0, result.output
    lines = job_lines(result.stdout)
    assert len(lines) == 2, result.stdout
    for number, (line, name) in enumerate(zip(lines, ("report.pdf", "table.pdf"), strict=True), 1):
        assert re.match(
            rf"\[{number}/2\] READY +{re.escape(name)} +\S+ +1 pages, \d+ chunks$", line
        )

    result = cli(["ingest", files.report, files.table, "--json"], local)
    assert result.exit_code == 0, result.output
    assert [line.split()[1] for line in job_lines(result.stderr)] == ["unchanged"] * 2
    document = as_json(result)
    assert list(document) == ["jobs", "refused"] and document["refused"] == []
    jobs = [check_job(j) for j in document["jobs"]]
    assert [j.state for j in jobs] == [JobState.READY] * 2
    assert all(j.unchanged for j in jobs)
    assert [j.source_uri for j in jobs] == [files.report.as_uri(), files.table.as_uri()]


def test_ingest_local_partial_and_failed_batches(
    files: Files, local: dict[str, str | None]
) -> None:
    result = cli(["ingest", files.chart, files.garbage], local)
    assert result.exit_code == 3, result.output
    ready, failed = job_lines(result.stdout)
    assert ready.startswith("[1/2] READY ") and "chart.pdf" in ready
    assert failed.startswith("[2/2] FAILED ") and "garbage.pdf" in failed
    assert "input/UNSUPPORTED_FORMAT: " in failed
    assert "None" not in result.stdout

    result = cli(["ingest", files.archive, "--json"], local)
    assert result.exit_code == 1, result.output
    (job,) = as_json(result)["jobs"]
    assert check_job(job).state == JobState.FAILED
    assert (job["error_stage"], job["error_code"]) == ("input", "UNSUPPORTED_FORMAT")


def test_ingest_local_errors(files: Files, local: dict[str, str | None], tmp_path: Path) -> None:
    line = one_error(cli(["ingest", files.empty_dir], local), "NOT_FOUND", "input")
    assert "no files found" in line and str(files.empty_dir) in line

    missing = tmp_path / "nowhere.pdf"
    line = one_error(cli(["ingest", files.report, missing], local), "NOT_FOUND", "input")
    assert str(missing) in line

    line = one_error(cli(["ingest", files.report, "--replace"], local), "INVALID_REQUEST", "input")
    assert "--replace" in line

    usage_error(cli(["ingest", files.report, "--timeout-s", "0"], local), "--timeout-s")
    usage_error(cli(["ingest", files.report, "--bogus"], local), "--bogus")


def test_ingest_remote_uploads(files: Files, remote: Remote) -> None:
    server = remote.args("t-ingest")
    result = cli(["ingest", files.report, files.table, *server], {})
    assert result.exit_code == 0, result.output
    lines = job_lines(result.stdout)
    assert [line.split()[:3] for line in lines] == [
        ["[1/2]", "READY", "report.pdf"],
        ["[2/2]", "READY", "table.pdf"],
    ]

    result = cli(["ingest", files.report, "--json", *server], {})
    assert result.exit_code == 0, result.output
    (job,) = as_json(result)["jobs"]
    status = check_job(job)
    assert status.state == JobState.READY and status.unchanged
    assert status.source_uri == "upload:report.pdf"
    assert str(remote.data_dir) not in result.stdout  # no storage path of the server
    assert job_lines(result.stderr)[0].split()[:3] == ["[1/1]", "unchanged", "report.pdf"]


def test_ingest_remote_refuses_options_the_key_decides(files: Files, remote: Remote) -> None:
    line = one_error(
        cli(["ingest", files.report, "--tenant", "other", *remote.args("t-errors")], {}),
        "INVALID_REQUEST",
        "input",
    )
    assert "--tenant" in line and "the API key decides" in line

    line = one_error(cli(["ingest", files.report, "--server", remote.url], {}), "UNAUTHORIZED")
    assert "--api-key" in line


def test_ingest_remote_a_refused_upload_fails_alone(
    files: Files, remote: Remote, local: dict[str, str | None], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    local_result = cli(["ingest", files.report, empty], local)
    assert local_result.exit_code == 3, local_result.output  # the contract, as local mode keeps it
    result = cli(["ingest", files.report, empty, *remote.args("t-errors")], {})
    assert result.exit_code == 3, result.output
    ready, failed = job_lines(result.stdout)
    assert ready.split()[:3] == ["[1/2]", "READY", "report.pdf"]
    assert failed.split()[:3] == ["[2/2]", "FAILED", "empty.pdf"] and "/CORRUPT: " in failed


def test_ingest_honours_the_password(
    tmp_path: Path, remote: Remote, local: dict[str, str | None]
) -> None:
    locked = encrypted_pdf(tmp_path / "locked.pdf", "s3cret-pw")
    for mode_args, env in ((remote.args("t-password"), {}), ([], local)):
        result = cli(["ingest", locked, "--json", *mode_args], env)
        assert result.exit_code == 1, result.output
        (job,) = as_json(result)["jobs"]
        assert (job["state"], job["error_code"]) == ("FAILED", "ENCRYPTED"), job
        assert "/ENCRYPTED: " in result.stderr

        result = cli(["ingest", locked, "--password", "s3cret-pw", "--json", *mode_args], env)
        assert result.exit_code == 0, result.output
        (job,) = as_json(result)["jobs"]
        assert check_job(job).state == JobState.READY and job["pages"] == 1
        assert "s3cret-pw" not in result.output  # never echoed


def test_ingest_remote_replace(files: Files, remote: Remote, tmp_path: Path) -> None:
    server = remote.args("t-replace")
    first = cli(["ingest", files.report, "--json", *server], {})
    assert first.exit_code == 0, first.output
    (original,) = as_json(first)["jobs"]
    changed = tmp_path / "v2" / "report.pdf"
    changed.parent.mkdir()
    shutil.copy(files.table, changed)  # other bytes, same name
    result = cli(["ingest", changed, "--replace", "--json", *server], {})
    assert result.exit_code == 0, result.output
    (job,) = as_json(result)["jobs"]
    assert check_job(job).state == JobState.READY
    assert job["doc_id"] == original["doc_id"] and job["version"] != original["version"]


# -- jobs -----------------------------------------------------------------------------------


def _jobs_contract(mode_args: list[str], env: Mapping[str, str | None], files: Files) -> None:
    """One FAILED job, then two READY ones: the state filter applies before the limit."""
    assert cli(["ingest", files.garbage, *mode_args], env).exit_code == 1
    assert cli(["ingest", files.report, files.table, *mode_args], env).exit_code == 0

    result = cli(["jobs", *mode_args], env)
    assert result.exit_code == 0, result.output
    lines = job_lines(result.stdout)
    assert [line.split()[:2] for line in lines] == [
        ["READY", "table.pdf"],
        ["READY", "report.pdf"],
        ["FAILED", "garbage.pdf"],
    ]
    assert "input/UNSUPPORTED_FORMAT: " in lines[2]
    assert "None" not in result.stdout

    document = as_json(cli(["jobs", "--json", *mode_args], env))
    assert list(document) == ["jobs"]
    jobs = [check_job(j) for j in document["jobs"]]
    assert [j.state for j in jobs] == [JobState.READY, JobState.READY, JobState.FAILED]

    newest = as_json(cli(["jobs", "--limit", "1", "--json", *mode_args], env))["jobs"]
    assert [j["job_id"] for j in newest] == [jobs[0].job_id]
    result = cli(["jobs", "--state", "FAILED", "--limit", "1", "--json", *mode_args], env)
    assert result.exit_code == 0, result.output
    assert [j["job_id"] for j in as_json(result)["jobs"]] == [jobs[2].job_id]
    ready = as_json(cli(["jobs", "--state", "READY", "--json", *mode_args], env))["jobs"]
    assert [j["job_id"] for j in ready] == [jobs[0].job_id, jobs[1].job_id]

    usage_error(cli(["jobs", "--limit", "0", *mode_args], env), "--limit")
    usage_error(cli(["jobs", "--state", "DONE", *mode_args], env), "--state")


def test_jobs_local(files: Files, local: dict[str, str | None]) -> None:
    _jobs_contract([], local, files)
    result = cli(["jobs", "--tenant", "nobody"], local)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.strip() == "no jobs"
    assert as_json(cli(["jobs", "--tenant", "nobody", "--json"], local)) == {"jobs": []}


def test_jobs_remote(files: Files, remote: Remote) -> None:
    _jobs_contract(remote.args("t-jobs"), {}, files)
    # the server and key may come from the environment
    env = {"PAGESIGHT_SERVER_URL": remote.url, "PAGESIGHT_API_KEY": KEYS["t-jobs"][0]}
    assert len(as_json(cli(["jobs", "--json"], env))["jobs"]) == 3
    line = one_error(cli(["jobs", "--tenant", "t-ingest", "--json"], env), "INVALID_REQUEST")
    assert "the API key decides" in line


def test_jobs_in_progress(tmp_path: Path, local: dict[str, str | None]) -> None:
    for state in JobState:
        if not state.terminal:
            job = JobStatus(
                job_id="j1",
                tenant="default",
                source_uri="file:///in/a.pdf",
                doc_id="d1",
                state=state,
                created_at=datetime(2025, 1, 1, tzinfo=UTC),
                updated_at=datetime(2025, 1, 1, tzinfo=UTC),
            )
            line = _job_line(job)
            assert line.split()[:2] == [state.value, "a.pdf"] and line.endswith("in progress")
            assert "None" not in line

    data_dir = tmp_path / "var"
    data_dir.mkdir()
    catalog = Catalog(data_dir / "catalog.sqlite3")
    queued = catalog.new_job(
        tenant="default",
        source_uri=(tmp_path / "waiting.pdf").as_uri(),
        path=str(tmp_path / "waiting.pdf"),
        doc_id="doc-waiting",
        acl=[],
    )
    catalog.close()
    result = cli(["jobs"], local)  # reads only: the job stays queued
    assert result.exit_code == 0, result.output
    (line,) = job_lines(result.stdout)
    assert line.split() == ["PENDING", "waiting.pdf", "doc-waiting", "in", "progress"]
    (job,) = as_json(cli(["jobs", "--state", "PENDING", "--json"], local))["jobs"]
    assert check_job(job).job_id == queued.job_id and job["error_code"] is None


# -- delete ---------------------------------------------------------------------------------


def _delete_contract(
    mode_args: list[str], env: Mapping[str, str | None], files: Files, expected_stage: str
) -> str:
    """Ingest two files, delete both (text and --json); their jobs go with them. Returns the
    error line of deleting one again."""
    result = cli(["ingest", files.report, files.table, "--json", *mode_args], env)
    assert result.exit_code == 0, result.output
    report, table = (j["doc_id"] for j in as_json(result)["jobs"])

    result = cli(["delete", report, "--json", *mode_args], env)
    assert result.exit_code == 0, result.output
    assert as_json(result) == {"doc_id": report, "deleted": True}
    result = cli(["delete", table, *mode_args], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"deleted {table}"

    left = as_json(cli(["jobs", "--json", *mode_args], env))["jobs"]
    assert {j["doc_id"] for j in left} & {report, table} == set()
    hits = as_json(cli(["search", "revenue by region", "--json", *mode_args], env))["hits"]
    assert {h["doc_id"] for h in hits} & {report, table} == set()

    line = one_error(cli(["delete", report, *mode_args], env), "NOT_FOUND", expected_stage)
    assert report in line
    return line


def test_delete_local(files: Files, local: dict[str, str | None]) -> None:
    line = _delete_contract([], local, files, "input")
    assert "of tenant default" in line
    line = one_error(cli(["delete", "no-such-doc", "--tenant", "acme"], local), "NOT_FOUND")
    assert "no-such-doc of tenant acme" in line


def test_delete_remote(files: Files, remote: Remote) -> None:
    line = _delete_contract(remote.args("t-delete"), {}, files, "gateway")
    assert "(trace " in line  # the server's 404, with its trace id
    line = one_error(
        cli(["delete", "x", "--tenant", "t-ingest", *remote.args("t-delete")], {}),
        "INVALID_REQUEST",
    )
    assert "the API key decides" in line


# -- search ---------------------------------------------------------------------------------


def test_search_has_one_shape_in_both_modes(
    files: Files, remote: Remote, local: dict[str, str | None]
) -> None:
    responses = []
    for mode_args, env in ((remote.args("t-search"), {}), ([], local)):
        assert cli(["ingest", files.report, files.table, *mode_args], env).exit_code == 0
        result = cli(["search", "revenue by region", "--top-k", "2", "--json", *mode_args], env)
        assert result.exit_code == 0, result.output
        response = as_json(result)
        assert set(response) == SEARCH_KEYS
        assert response["hits"] and len(response["hits"]) <= 2
        assert all(set(hit) == HIT_KEYS for hit in response["hits"])
        assert response["hits"][0]["title"] == "Revenue by Region"
        responses.append(response)

        result = cli(["search", "revenue by region", "--route", "text", *mode_args], env)
        assert result.exit_code == 0, result.output
        first, hit = result.stdout.splitlines()[:2]
        assert first.startswith("route text — ") and " ms — trace " in first
        # the title with the file name next to it, never a bare id
        assert re.match(r" 1\. Revenue by Region — table\.pdf  page 1  score \d\.\d{4}  ", hit), hit
        assert response["hits"][0]["doc_id"] not in result.stdout
    remote_response, local_response = responses
    assert remote_response["route"] == local_response["route"]
    assert [h["page_number"] for h in remote_response["hits"]] == [
        h["page_number"] for h in local_response["hits"]
    ]


def test_answer_has_one_shape_in_both_modes(
    files: Files, remote: Remote, local: dict[str, str | None]
) -> None:
    answers = []
    for mode_args, env in ((remote.args("t-answer"), {}), ([], local)):
        assert cli(["ingest", files.report, *mode_args], env).exit_code == 0
        question = "What is the largest cost risk?"
        result = cli(["answer", question, "--route", "text", "--json", *mode_args], env)
        assert result.exit_code == 0, result.output
        response = as_json(result)
        assert not response["abstained"] and response["mode"] == "extractive"
        assert response["citations"] and "Fuel prices" in response["citations"][0]["quote"]
        answers.append(response)

        assert {"lead", "supporting", "related"} <= set(response)
        for cited in response["citations"]:
            assert {"parts", "title", "source_name"} <= set(cited)

        result = cli(["answer", question, "--route", "text", *mode_args], env)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        first = response["citations"][0]
        assert "[1]" in lines[0]
        if response["lead"] is not None:  # the direct answer first, then where it is printed
            lead = response["lead"]
            assert lines[0] == f"{lead['text']} " + "".join(f"[{n}]" for n in lead["citations"])
            assert re.fullmatch(r"  \[\d+\] .+ — report\.pdf, pp?\. \d+(–\d+)?", lines[1])
        citations = lines[lines.index("Citations:") + 1 :]
        assert len(citations) == len(response["citations"])
        assert citations[0].startswith(f"[{first['n']}] ")
        assert " — report.pdf, p. 1: “Fuel prices" in citations[0]  # title — file, page, quote
        assert first["doc_id"] not in result.stdout  # never a bare id
        assert "extractive, confidence " in result.stderr
        one_error(cli(["answer", question, "--policy", "lax", *mode_args], env), "INVALID_REQUEST")
    remote_answer, local_answer = answers
    assert set(remote_answer) == set(local_answer)
    assert remote_answer["answer"] == local_answer["answer"]


# The human form of an answer, on answers of the documented shape (README, "Command line"),
# whatever the pipeline picks: the session's backend returns them as they are.
PEW_ID = "0b7c41e2-5d1a-4c9e-9a53-6f0d2c8e1a77"
PEW_FILE = "PG_2020.03.09_US-Germany_FINAL.pdf"
PEW_TITLE = "Americans and Germans Disagree on the State of Bilateral Relations"
PEW_LEAD = "In 2019, 35% of Americans said European allies should increase defense spending."
PEW_CROSSING = (
    "Americans are somewhat less likely than in 2017 to say that European allies should spend "
    "more on national defense, and the share who say allies should keep spending the same has "
    "grown, while Germans are divided over whether to increase spending."
)


def _cited(n: int, pages: list[int], quote: str, named: bool = True) -> Citation:
    return Citation(
        n=n,
        doc_id=PEW_ID,
        page_number=pages[0],
        chunk_id=f"chunk-{n}",
        bboxes=[BBox(x0=72, y0=100, x1=300, y1=112)],
        page_image_url=f"/v1/documents/x/pages/{pages[0]}/image",
        quote=quote,
        parts=[
            QuotePart(page_number=p, text=quote, bboxes=[BBox(x0=72, y0=90, x1=300, y1=99)])
            for p in pages
        ],
        title=PEW_TITLE if named else None,
        source_name=PEW_FILE if named else None,
    )


@pytest.fixture()
def answered(monkeypatch: pytest.MonkeyPatch) -> Callable[[AnswerResponse], None]:
    """``pagesight answer`` answers with the given response (no index is opened); the
    documents list names the document for citations that carry no title or file name."""

    def use(response: AnswerResponse) -> None:
        document = Document(
            doc_id=PEW_ID, version="0" * 64, source_uri=f"upload:{PEW_FILE}", title=PEW_TITLE
        )
        backend = SimpleNamespace(
            answer=lambda caller, request, trace_id: response,
            documents=lambda caller: [document],
        )

        @contextlib.contextmanager
        def session(*args: Any, **kwargs: Any) -> Iterator[Any]:
            yield SimpleNamespace(backend=backend, caller=None)

        monkeypatch.setattr(cli_module, "_session", session)

    return use


def test_answer_prints_the_lead_first_then_supporting_quotes_and_citations(
    answered: Callable[[AnswerResponse], None],
) -> None:
    long_quote = "Asked about defense spending, " + "allies and partners " * 20 + "disagree."
    response = AnswerResponse(
        answer=PEW_LEAD,
        abstained=False,
        sentences=[AnswerSentence(text=PEW_LEAD, citations=[1])],
        lead=AnswerUnit(text=PEW_LEAD, kind="sentence", value="35%", citations=[1]),
        supporting=[
            AnswerUnit(text=PEW_CROSSING, citations=[2]),
            AnswerUnit(text=long_quote, citations=[1]),
        ],
        citations=[_cited(1, [8], PEW_LEAD), _cited(2, [7, 8], PEW_CROSSING, named=False)],
        confidence=0.71,
        mode="extractive",
        trace_id="trace-lead",
    )
    answered(response)
    result = cli(["answer", "share of Americans in 2019 saying allies should increase defence"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"{PEW_LEAD} [1]",  # the direct answer first, with its marker
        f"  [1] {PEW_TITLE} — {PEW_FILE}, p. 8",  # where it is printed
        "",
        "Supporting:",
    ]
    supporting = lines[4:6]
    assert all(line.startswith("  - ") for line in supporting)  # indented, one line each
    assert supporting[0].endswith(" [2]") and supporting[1].endswith("… [1]")
    assert len(supporting[1]) <= len("  - ") + 160 + len(" [1]")  # shortened
    assert lines[6:8] == ["", "Citations:"]
    assert lines[8].startswith(f"[1] {PEW_TITLE} — {PEW_FILE}, p. 8: “{PEW_LEAD}")
    # named from the documents list; a quote across a page break gives both pages
    assert lines[9].startswith(f"[2] {PEW_TITLE} — {PEW_FILE}, pp. 7–8: “Americans are")
    assert len(lines) == 10
    assert PEW_ID not in result.stdout  # never a bare id
    assert "extractive, confidence 0.71, trace trace-lead" in result.stderr

    # --json: the response model as it is, the lead's value included
    printed = as_json(cli(["answer", "share of Americans", "--json"]))
    assert printed == json.loads(response.model_dump_json())
    assert printed["lead"]["value"] == "35%"
    assert [p["page_number"] for p in printed["citations"][1]["parts"]] == [7, 8]


def test_answer_prints_an_abstentions_reason_and_related_passages(
    answered: Callable[[AnswerResponse], None],
) -> None:
    reason = "no passage states a dividend per share for fiscal 2022"
    answered(
        AnswerResponse(
            answer="The documents do not contain this.",
            abstained=True,
            reason=reason,
            related=[_cited(1, [3], PEW_CROSSING), _cited(2, [7, 8], "", named=False)],
            confidence=0.42,
            mode="extractive",
            trace_id="trace-abstain",
        )
    )
    result = cli(["answer", "What dividend per share did Ulta pay in fiscal 2022?"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "The documents do not contain this.",
        f"Why: {reason}",
        "",
        "Related:",
        f"  - {PEW_TITLE} — {PEW_FILE}, p. 3: “{PEW_CROSSING[:139]}…”",
        f"  - {PEW_TITLE} — {PEW_FILE}, pp. 7–8",
    ]


def test_answer_without_a_lead_prints_its_sentences(
    answered: Callable[[AnswerResponse], None],
) -> None:
    """A server that sends no ``lead`` (older): the sentences with markers, then citations."""
    answered(
        AnswerResponse(
            answer=f"{PEW_LEAD} {PEW_CROSSING}",
            abstained=False,
            sentences=[
                AnswerSentence(text=PEW_LEAD, citations=[1]),
                AnswerSentence(text=PEW_CROSSING, citations=[2]),
            ],
            citations=[_cited(1, [8], PEW_LEAD), _cited(2, [7], PEW_CROSSING)],
            confidence=0.6,
            mode="llm",
            trace_id="trace-old",
        )
    )
    lines = cli(["answer", "share of Americans"]).stdout.splitlines()
    assert lines[0] == f"{PEW_LEAD[:-1]} [1]. {PEW_CROSSING[:-1]} [2]."
    assert lines[1:3] == ["", "Citations:"]
    assert lines[3].startswith(f"[1] {PEW_TITLE} — {PEW_FILE}, p. 8: ")
    assert lines[4].startswith(f"[2] {PEW_TITLE} — {PEW_FILE}, p. 7: ")


def test_search_errors_local(local: dict[str, str | None]) -> None:
    line = one_error(cli(["search", "a chart", "--route", "visual"], local), "ROUTE_UNAVAILABLE")
    assert line.startswith("query/ROUTE_UNAVAILABLE: ")
    usage_error(cli(["search", "x", "--top-k", "0"], local), "--top-k")
    usage_error(cli(["search", "x", "--route", "sideways"], local), "--route")
    result = cli(["search", "anything", "--json"], local)  # an empty index: no hits, no error
    assert result.exit_code == 0, result.output
    assert as_json(result)["hits"] == []


def test_search_errors_remote(remote: Remote) -> None:
    server = remote.args("t-errors")
    line = one_error(
        cli(["search", "a chart", "--route", "visual", *server], {}), "ROUTE_UNAVAILABLE"
    )
    assert line.startswith("query/ROUTE_UNAVAILABLE: ")

    line = one_error(
        cli(["search", "x", "--principal", "group:hr", *server], {}), "INVALID_REQUEST"
    )
    assert "--principal" in line and "the API key decides" in line

    bad_key = ["--server", remote.url, "--api-key", "ps_not-a-real-key"]
    line = one_error(cli(["search", "x", *bad_key], {}), "UNAUTHORIZED", "auth")

    down = f"http://127.0.0.1:{free_port()}"
    line = one_error(cli(["search", "x", "--server", down, "--api-key", "k"], {}), "UNAVAILABLE")
    assert line.startswith(f"gateway/UNAVAILABLE: cannot reach the server {down}"), line

    no_scheme = remote.url.removeprefix("http://")
    line = one_error(
        cli(["search", "x", "--server", no_scheme, "--api-key", "k"], {}), "INVALID_REQUEST"
    )
    assert (
        line == f"input/INVALID_REQUEST: --server must be an http:// or https:// URL, not "
        f"{no_scheme!r}"
    )

    usage_error(cli(["search", "x", "--top-k", "0", *server], {}), "--top-k")


# -- sync -----------------------------------------------------------------------------------


def test_sync_contract(files: Files, local: dict[str, str | None], tmp_path: Path) -> None:
    folder = tmp_path / "synced"
    folder.mkdir()
    shutil.copy(files.report, folder / "report.pdf")
    result = cli(["sync", folder, "--json"], local)
    assert result.exit_code == 0, result.output
    document = as_json(result)
    assert set(document) == {"jobs", "deleted"} and document["deleted"] == []
    (job,) = document["jobs"]
    assert check_job(job).state == JobState.READY
    report_doc = job["doc_id"]

    (folder / "report.pdf").unlink()
    shutil.copy(files.table, folder / "table.pdf")
    result = cli(["sync", folder], local)
    assert result.exit_code == 0, result.output
    ready, deleted = job_lines(result.stdout)
    assert ready.split()[:2] == ["READY", "table.pdf"]
    assert deleted == f"deleted {report_doc} (no longer in {folder})"

    missing = tmp_path / "gone"
    line = one_error(cli(["sync", missing], local), "NOT_FOUND", "input")
    assert str(missing) in line
    usage_error(cli(["sync", folder, "--server", "http://127.0.0.1:1"], local), "--server")


# -- keys -----------------------------------------------------------------------------------


def test_keys_new_list_revoke(tmp_path: Path, local: dict[str, str | None]) -> None:
    keys_file = tmp_path / "keys.json"
    at = ["--keys-file", str(keys_file)]
    result = cli(
        [
            *("keys", "new", "--tenant", "acme", "--key-id", "k1", "--principal", "group:a"),
            *("--scope", "read", "--json", *at),
        ],
        local,
    )
    assert result.exit_code == 0, result.output
    made = as_json(result)
    assert set(made) == {
        *("key_id", "tenant", "principals", "scopes", "keys_file", "stored_in", "key")
    }
    assert made["key_id"] == "k1" and made["tenant"] == "acme"
    assert made["principals"] == ["group:a"] and made["scopes"] == ["read"]
    assert made["keys_file"] == made["stored_in"] == str(keys_file) and made["key"]

    result = cli(["keys", "new", "--tenant", "acme", *at], local)  # text: the key alone
    assert result.exit_code == 0, result.output
    (second_key,) = result.stdout.splitlines()
    assert "added key-" in result.stderr and "read+write" in result.stderr
    assert second_key not in result.stderr

    listed = as_json(cli(["keys", "list", "--json", *at], local))
    assert list(listed) == ["keys"]
    assert [set(k) for k in listed["keys"]] == [
        {"key_id", "tenant", "principals", "scopes", "revoked_at"}
    ] * 2
    assert made["key"] not in json.dumps(listed) and second_key not in json.dumps(listed)

    result = cli(["keys", "revoke", "k1", "--json", *at], local)
    assert result.exit_code == 0, result.output
    assert as_json(result) == {"key_id": "k1", "revoked": True}
    listed = as_json(cli(["keys", "list", "--json", *at], local))["keys"]
    assert [k["revoked_at"] is not None for k in listed] == [True, False]
    text = cli(["keys", "list", *at], local).stdout.splitlines()
    assert text[0].startswith("k1  tenant=acme  scopes=read  principals=group:a  revoked ")

    line = one_error(cli(["keys", "revoke", "k1", *at], local), "NOT_FOUND", "auth")
    assert "'k1'" in line
    line = one_error(
        cli(["keys", "new", "--tenant", "acme", "--scope", "admin", *at], local),
        "INVALID_REQUEST",
        "input",
    )
    assert "unknown scope 'admin'" in line
    usage_error(cli(["keys", "new", *at], local), "--tenant")


def test_keys_default_to_the_data_dir(tmp_path: Path, local: dict[str, str | None]) -> None:
    result = cli(["keys", "new", "--tenant", "acme", "--json"], local)
    assert result.exit_code == 0, result.output
    assert as_json(result)["keys_file"] == str(tmp_path / "var" / "api-keys.json")
    assert len(as_json(cli(["keys", "list", "--json"], local))["keys"]) == 1


def test_keys_go_to_postgres_when_a_database_is_set(
    tmp_path: Path, local: dict[str, str | None], postgres_url: str
) -> None:
    """PAGESIGHT_DATABASE_URL set: the keys commands act on PostgreSQL (what every gateway
    replica reads) unless --keys-file names a file; the output says where the key went."""
    env = {**local, "PAGESIGHT_DATABASE_URL": postgres_url}
    result = cli(["keys", "new", "--tenant", "acme", "--key-id", "k1", "--json"], env)
    assert result.exit_code == 0, result.output
    made = as_json(result)
    assert made["keys_file"] is None and made["stored_in"].startswith("PostgreSQL 127.0.0.1:")
    result = cli(["keys", "new", "--tenant", "acme", "--key-id", "k2"], env)
    assert result.exit_code == 0, result.output
    assert "to PostgreSQL 127.0.0.1:" in result.stderr
    assert not (tmp_path / "var" / "api-keys.json").exists()

    gateway = GatewayOptions(keys_reload_s=0)
    ring = KeyRing.from_settings(Settings(database_url=postgres_url, gateway=gateway))
    assert ring.authenticate(None, made["key"]).tenant == "acme"
    result = cli(["keys", "revoke", "k1"], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("revoked k1 in PostgreSQL")
    with pytest.raises(PageSightError, match="unknown or revoked"):
        ring.authenticate(None, made["key"])
    ring.close()
    listed = as_json(cli(["keys", "list", "--json"], env))["keys"]
    assert [(k["key_id"], k["revoked_at"] is not None) for k in listed] == [
        ("k1", True),
        ("k2", False),
    ]
    line = one_error(cli(["keys", "revoke", "k1"], env), "NOT_FOUND", "auth")
    assert "in PostgreSQL" in line
    line = one_error(
        cli(["keys", "new", "--tenant", "x", "--key-id", "k2"], env), "INVALID_REQUEST", "auth"
    )
    assert "'k2'" in line

    keys_file = tmp_path / "keys.json"  # --keys-file: that file, not the database
    result = cli(["keys", "new", "--tenant", "acme", "--json", "--keys-file", keys_file], env)
    assert as_json(result)["keys_file"] == str(keys_file)
    assert len(as_json(cli(["keys", "list", "--json"], env))["keys"]) == 2


def test_keys_drive_a_running_gateway(remote: Remote, local: dict[str, str | None]) -> None:
    at = ["--keys-file", str(remote.keys_file)]
    made = as_json(
        cli(["keys", "new", "--tenant", "t-file", "--key-id", "live", "--json", *at], local)
    )
    server = ["--server", remote.url, "--api-key", made["key"]]
    result = cli(["search", "anything", "--json", *server])
    assert result.exit_code == 0, result.output
    assert cli(["keys", "revoke", "live", *at], local).exit_code == 0
    one_error(cli(["search", "anything", *server]), "UNAUTHORIZED", "auth")


# -- serve and demo -------------------------------------------------------------------------


def test_serve_help_and_no_keys(local: dict[str, str | None]) -> None:
    result = cli(["serve", "--help"], local)
    assert result.exit_code == 0, result.output
    assert "--no-ray" in result.stdout and "--config" in result.stdout

    line = one_error(cli(["serve", "--no-ray", "--json"], local), "UNAUTHORIZED", "auth")
    assert "pagesight keys new --tenant" in line
    usage_error(cli(["serve", "--port", "0"], local), "--port")


def test_demo_on_a_folder(files: Files, local: dict[str, str | None], tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    shutil.copy(files.report, folder / "report.pdf")
    result = cli(["demo", "--docs", folder, "--json"], local)
    assert result.exit_code == 0, result.output
    document = as_json(result)
    assert set(document) == {"jobs", "searches", "ui"} and document["searches"] == []
    (job,) = document["jobs"]
    assert check_job(job).state == JobState.READY
    assert job_lines(result.stderr)[0].split()[:2] == ["READY", "report.pdf"]
    # a key for the web UI, printed with its URL; the next demo revokes it for a new one
    ui = document["ui"]
    assert ui["url"] == "http://127.0.0.1:8000/ui" and ui["key"].startswith("ps_")
    again = cli(["demo", "--docs", folder], local)
    assert again.exit_code == 0, again.output
    assert "http://127.0.0.1:8000/ui" in again.stdout and "make serve" in again.stdout
    keys = {k["key_id"]: k for k in as_json(cli(["keys", "list", "--json"], local))["keys"]}
    assert keys[ui["key_id"]]["revoked_at"] is not None
    (live,) = [k for k in keys.values() if k["revoked_at"] is None]
    assert live["tenant"] == "default" and live["key_id"].startswith("demo-ui-")
    assert live["scopes"] == ["read", "write"]

    line = one_error(cli(["demo", "--docs", tmp_path / "nothing"], local), "NOT_FOUND", "input")
    assert "nothing" in line


def test_library_warnings_print_one_line_without_their_traceback(
    monkeypatch: pytest.MonkeyPatch, local: dict[str, str | None]
) -> None:
    """A library logging a warning with ``exc_info`` (a stale cache, say) adds one
    ``warning: ...`` line, not the traceback Python's last-resort handler would print."""
    import contextlib
    import logging

    import pagesight.entrypoints.cli

    @contextlib.contextmanager
    def noisy_session(*_args: object, **_kwargs: object) -> Iterator[object]:
        try:
            raise ZeroDivisionError("stale cache record")
        except ZeroDivisionError:
            logging.getLogger("models.some_cache").warning("cache ignored", exc_info=True)

        class Backend:
            def jobs(self, *_a: object) -> list[object]:
                return []

        yield type("Session", (), {"backend": Backend(), "caller": None})()

    monkeypatch.setattr(pagesight.entrypoints.cli, "_session", noisy_session)
    result = cli(["jobs"], local)
    assert result.exit_code == 0, result.output
    assert "warning: cache ignored" in result.stderr
    assert "ZeroDivisionError" not in result.output


def test_search_and_answer_in_one_document(
    files: Files, local: dict[str, str | None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--doc ID|FILE`` scopes search and answer to documents the caller may read: an id, a
    path (the document ingested from it) or a file name; an unknown one is a clear error,
    never a search of everything."""
    result = cli(["ingest", files.report, files.table, "--json"], local)
    assert result.exit_code == 0, result.output
    report, table = (j["doc_id"] for j in as_json(result)["jobs"])
    result = cli(["ingest", files.chart, "--acl", "alice", "--json"], local)
    assert result.exit_code == 0, result.output
    (chart,) = (j["doc_id"] for j in as_json(result)["jobs"])

    monkeypatch.chdir(tmp_path)  # the file name alone, from another folder
    for value, expected in ((report, report), (files.table, table), ("chart.pdf", chart)):
        found = as_json(cli(["search", "revenue by region", "--doc", value, "--json"], local))
        assert found["hits"] and {h["doc_id"] for h in found["hits"]} == {expected}, value
    both = as_json(cli(["search", "revenue", "--doc", report, "--doc", table, "--json"], local))
    assert {h["doc_id"] for h in both["hits"]} <= {report, table}

    answered = cli(["answer", "What is the largest cost risk?", "--doc", report, "--json"], local)
    assert answered.exit_code == 0, answered.output
    response = as_json(answered)
    assert response["citations"] and {c["doc_id"] for c in response["citations"]} == {report}
    elsewhere = as_json(
        cli(["answer", "What is the largest cost risk?", "--doc", table, "--json"], local)
    )
    assert all(c["doc_id"] == table for c in [*elsewhere["citations"], *elsewhere["related"]])

    line = one_error(cli(["search", "x", "--doc", "nothing.pdf"], local), "NOT_FOUND", "input")
    assert "--doc nothing.pdf" in line
    # another principal may not read alice's document: it is unknown to them
    line = one_error(
        cli(["answer", "x", "--doc", chart, "--principal", "bob"], local), "NOT_FOUND", "input"
    )
    assert chart in line
    found = as_json(cli(["search", "x", "--doc", chart, "--principal", "alice", "--json"], local))
    assert {h["doc_id"] for h in found["hits"]} <= {chart}
