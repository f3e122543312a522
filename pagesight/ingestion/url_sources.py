"""Which URIs may be ingested from, and fetching them safely (the index service's
:class:`SourcePolicy`; file-format checks are :mod:`pagesight.ingestion.sources`).

``POST /v1/documents`` with a URI is a server-side request: left open, it lets any API key make
the service read internal URLs (cloud metadata, admin ports) or local files. So a URI is
accepted only when it falls under an entry of the configured allowlist
(``PAGESIGHT_GATEWAY__URI_ALLOWLIST``): same scheme, same host and port, path under the
entry's path. ``file://`` entries name directories; the file's real path (symlinks and ``..``
resolved) must stay inside. ``http(s)`` hosts must resolve to public addresses unless
``allow_private_addresses`` is set, redirects are followed by hand and every hop is checked
the same way, and the body is capped at the upload limit.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

import httpx

from pagesight.core.errors import ErrorCode, PageSightError, Stage

_SCHEMES = ("file", "http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class AllowedSource:
    scheme: str
    host: str
    port: int | None
    path: str  # a directory prefix, ending in "/"

    @classmethod
    def parse(cls, entry: str) -> AllowedSource:
        parts = urlsplit(entry)
        scheme = parts.scheme.lower()
        if scheme not in _SCHEMES:
            raise ValueError(f"allowlist entry {entry!r}: scheme must be one of {_SCHEMES}")
        if scheme != "file" and not parts.hostname:
            raise ValueError(f"allowlist entry {entry!r} names no host")
        path = unquote(parts.path) or "/"
        if not path.endswith("/"):
            path += "/"
        port = parts.port or _DEFAULT_PORTS.get(scheme)
        return cls(scheme, (parts.hostname or "").lower(), port, path)

    def admits(self, scheme: str, host: str, port: int | None, path: str) -> bool:
        if (scheme, host, port) != (self.scheme, self.host, self.port):
            return False
        normal = str(PurePosixPath("/" + path.lstrip("/")))
        if ".." in PurePosixPath(path).parts:
            return False
        return (normal + ("/" if path.endswith("/") else "")).startswith(self.path)


class SourcePolicy:
    """The allowlist and the fetcher (``check`` on the request path, ``fetch`` off it)."""

    def __init__(
        self,
        allowlist: list[str],
        *,
        allow_private_addresses: bool = False,
        max_redirects: int = 3,
        max_bytes: int = 100 * 1024 * 1024,
        timeout_s: float = 60.0,
    ) -> None:
        self.allowed = [AllowedSource.parse(e) for e in allowlist]
        self.allow_private_addresses = allow_private_addresses
        self.max_redirects = max_redirects
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    def check(self, uri: str) -> str:
        """The URI if the allowlist admits it, else SOURCE_NOT_ALLOWED (no network access)."""
        if not self.allowed:
            raise _not_allowed("ingesting from a URI is disabled here: upload the file instead")
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or _DEFAULT_PORTS.get(scheme)
        except ValueError as exc:
            raise _not_allowed(f"malformed URI {uri!r}: {exc}") from exc
        if parts.username or parts.password:
            raise _not_allowed("URIs with credentials are not accepted")
        host = (parts.hostname or "").lower()
        path = unquote(parts.path)
        if not any(a.admits(scheme, host, port, path) for a in self.allowed):
            raise _not_allowed(f"{uri!r} is not under any allowed source of this gateway")
        if scheme == "file":
            self._local_file(path)
        return uri

    def fetch(self, uri: str, dest: Path) -> Path:
        """The document behind ``uri`` as a local file: a checked ``file://`` path as it is,
        an http(s) body downloaded into ``dest`` (a file path)."""
        self.check(uri)
        parts = urlsplit(uri)
        if parts.scheme.lower() == "file":
            return self._local_file(unquote(parts.path))
        return self._download(uri, dest)

    # -- local files --

    def _local_file(self, path: str) -> Path:
        if "\x00" in path:
            raise _not_allowed("a file path cannot contain a NUL character")
        real = Path(path).resolve()
        inside = any(
            a.scheme == "file" and real.is_relative_to(Path(a.path).resolve()) for a in self.allowed
        )
        if not inside:
            raise _not_allowed(f"{path!r} resolves outside the allowed directories")
        if not real.is_file():
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file: {path}")
        return real

    # -- http(s) --

    def _download(self, uri: str, dest: Path) -> Path:
        url = uri
        with httpx.Client(follow_redirects=False, timeout=self.timeout_s) as client:
            for _hop in range(self.max_redirects + 1):
                self._check_address(url)
                with client.stream("GET", url) as response:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        url = self.check(urljoin(url, location))
                        continue
                    if response.status_code != 200:
                        raise PageSightError(
                            ErrorCode.NOT_FOUND,
                            Stage.INPUT,
                            f"{url} answered HTTP {response.status_code}",
                        )
                    declared = int(response.headers.get("content-length") or 0)
                    if declared > self.max_bytes:
                        raise _too_large(self.max_bytes)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    written = 0
                    with dest.open("wb") as out:
                        for block in response.iter_bytes(1 << 20):
                            written += len(block)
                            if written > self.max_bytes:
                                out.close()
                                dest.unlink(missing_ok=True)
                                raise _too_large(self.max_bytes)
                            out.write(block)
                    return dest
        raise _not_allowed(f"more than {self.max_redirects} redirects from {uri}")

    def _check_address(self, url: str) -> None:
        """Refuse hosts that resolve to private, loopback, link-local or reserved addresses."""
        if self.allow_private_addresses:
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            infos = socket.getaddrinfo(host, parts.port or _DEFAULT_PORTS.get(parts.scheme, 443))
        except socket.gaierror as exc:
            raise PageSightError(
                ErrorCode.NOT_FOUND, Stage.INPUT, f"cannot resolve {host!r}: {exc}"
            ) from exc
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if not address.is_global:
                raise _not_allowed(f"{host!r} resolves to a non-public address ({address})")


def _not_allowed(message: str) -> PageSightError:
    return PageSightError(ErrorCode.SOURCE_NOT_ALLOWED, Stage.INPUT, message)


def _too_large(limit: int) -> PageSightError:
    return PageSightError(
        ErrorCode.TOO_LARGE, Stage.INPUT, f"the document is larger than the limit of {limit} bytes"
    )
