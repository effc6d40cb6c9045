"""HTTPS all the way: a TLS-terminating proxy with a self-signed certificate in front of the testbed.

The proxy (a raw ASGI app on uvicorn, in its own thread) forwards every request to the testbed's
server with httpx, streaming responses (command output is an event stream) and passing request
bodies (multipart uploads). It keeps the client's Host header, so the server's endpoint answers
for `use_server_proxy=True` point back at the proxy: every command and file request goes
client -> TLS -> proxy -> server -> sandbox. The tests assert that each request the client sent was
`https://` to the proxy, that the proxy saw it over TLS, and that a client that does not trust the
certificate authority is refused.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec, ServerError
from opensandbox_core.fleet import destroy_sandbox

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

_HOP = {
    b"host",
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
    b"proxy-connection",
    b"content-length",
}


# -- certificates --------------------------------------------------------------------------------
def _make_certs(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:  # pragma: no cover - the openssl CLI instead
        return _make_certs_openssl(directory)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "osb test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = directory / "ca.pem"
    cert_pem = directory / "cert.pem"
    key_pem = directory / "key.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_pem, cert_pem, key_pem


def _make_certs_openssl(directory: Path) -> tuple[Path, Path, Path]:  # pragma: no cover
    import subprocess

    ca_key, ca_pem = directory / "ca.key", directory / "ca.pem"
    key_pem, csr, cert_pem = directory / "key.pem", directory / "srv.csr", directory / "cert.pem"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run = subprocess.run
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", ca_key, "-out", ca_pem, "-days", "1", "-subj", "/CN=osb test CA"],
        check=True, capture_output=True)  # fmt: skip
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key_pem, "-out", csr, "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True)  # fmt: skip
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
         "-CAcreateserial", "-out", cert_pem, "-days", "1", "-extfile", ext],
        check=True, capture_output=True)  # fmt: skip
    return ca_pem, cert_pem, key_pem


# -- the proxy -----------------------------------------------------------------------------------
@dataclass
class TlsProxy:
    upstream: str
    port: int = 0
    ca: Path = Path()
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (scheme, method, path)
    connections: set[tuple[str, int]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def domain(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def snapshot(self) -> tuple[int, int]:
        with self.lock:
            return len(self.requests), len(self.connections)

    def since(self, start: int) -> list[tuple[str, str, str]]:
        with self.lock:
            return list(self.requests[start:])

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._client = httpx.AsyncClient(
                        base_url=self.upstream, timeout=httpx.Timeout(600, connect=10)
                    )
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self._client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert scope["type"] == "http"
        client = scope.get("client") or ("?", 0)
        with self.lock:
            self.requests.append((scope["scheme"], scope["method"], scope["path"]))
            self.connections.add((client[0], client[1]))
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        host = dict(scope["headers"]).get(b"host", b"")
        headers.append((b"host", host))  # the server builds proxy endpoints from it
        path = scope["raw_path"].decode() or scope["path"]
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode()
        request = self._client.build_request(
            scope["method"], path, headers=headers, content=bytes(body)
        )
        response = await self._client.send(request, stream=True)
        try:
            out = [
                (k.encode(), v.encode())
                for k, v in response.headers.multi_items()
                if k.lower().encode() not in _HOP - {b"content-length"}
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": out}
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


@pytest.fixture(scope="module")
def tls_proxy(
    testbed_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsProxy]:
    directory = tmp_path_factory.mktemp("tls")
    ca, cert, key = _make_certs(directory)
    proxy = TlsProxy(upstream=f"http://{testbed_env['OPEN_SANDBOX_DOMAIN']}", ca=ca)
    config = uvicorn.Config(
        proxy.app,
        host="127.0.0.1",
        port=0,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        log_level="warning",
        lifespan="on",
        interface="asgi3",
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="tls-proxy", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the TLS proxy did not start"
        time.sleep(0.05)
    proxy.port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.should_exit = True
        thread.join(30)


class RecordingTransport(httpx.AsyncBaseTransport):
    """Trusts only the test CA, and records the URL of every request the client sends."""

    def __init__(self, ca: Path) -> None:
        self.urls: list[httpx.URL] = []
        self._inner = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(ca)))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(request.url)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _assert_all_through_proxy(proxy: TlsProxy, urls: list[httpx.URL]) -> None:
    assert urls
    assert {(u.scheme, u.host, u.port) for u in urls} == {("https", "127.0.0.1", proxy.port)}


# -- the tests -------------------------------------------------------------------------------------
async def test_untrusted_certificate_is_refused(tls_proxy: TlsProxy, sandbox_image: str) -> None:
    before, _ = tls_proxy.snapshot()
    session = AsyncSandboxSession(
        SandboxSpec(image=sandbox_image),
        connection=Connection(domain=tls_proxy.domain, use_server_proxy=True),
    )
    with pytest.raises(ServerError) as info:
        await session.start()
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    await session.aclose()
    assert tls_proxy.snapshot()[0] == before  # no request got through the handshake


async def test_core_commands_and_files_over_https(
    tls_proxy: TlsProxy, testbed_env: dict[str, str], sandbox_image: str
) -> None:
    transport = RecordingTransport(tls_proxy.ca)
    start, connections_before = tls_proxy.snapshot()
    connection = Connection(domain=tls_proxy.domain, use_server_proxy=True, transport=transport)
    try:
        async with AsyncSandboxSession(
            SandboxSpec(image=sandbox_image), connection=connection
        ) as sb:
            sandbox_id = sb.id
            result = await sb.commands.run("printf 'a\\n\\nb\\n'; echo err >&2; exit 3")
            assert (result.exit_code, result.stdout, result.stderr) == (3, "a\n\nb\n", "err\n")
            streamed: list[str] = []
            result = await sb.commands.run(
                "for i in 1 2 3; do echo line$i; sleep 0.2; done",
                on_output=lambda stream, text: streamed.append(text),
            )
            assert result.stdout == "line1\nline2\nline3\n"
            assert "".join(streamed) == result.stdout
            data = os.urandom(3 * 1024 * 1024 + 17)
            await sb.files.write_bytes("dir/blob.bin", data)
            assert await sb.files.read_bytes("dir/blob.bin") == data
            results = await sb.files.upload_files([("a.txt", b"A"), ("b.txt", b"B" * 70000)])
            assert [r.error for r in results] == [None, None]
            downloads = await sb.files.download_files(["a.txt", "b.txt"])
            assert [d.content for d in downloads] == [b"A", b"B" * 70000]
    finally:
        await transport.aclose()
    assert sandbox_id is not None
    _assert_all_through_proxy(tls_proxy, transport.urls)
    seen = tls_proxy.since(start)
    assert {scheme for scheme, _, _ in seen} == {"https"}
    assert len(seen) == len(transport.urls)  # every request the client sent reached the proxy
    paths = [path for _, _, path in seen]
    proxied = f"/v1/sandboxes/{sandbox_id}/proxy/44772"
    assert any(p == f"{proxied}/command" for p in paths)
    assert any(p == f"{proxied}/files/upload" for p in paths)
    assert any(p == f"{proxied}/files/download" for p in paths)
    assert tls_proxy.snapshot()[1] > connections_before  # TLS connections were opened
    # The sandbox is gone (destroyed through the proxy too).
    assert not await destroy_sandbox(
        sandbox_id, Connection(domain=testbed_env["OPEN_SANDBOX_DOMAIN"])
    )


def test_deepagents_backend_over_https(
    tls_proxy: TlsProxy, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend_module = pytest.importorskip("deepagents_opensandbox_backend")
    # create() takes no transport: the SDK's and the core's own transports trust SSL_CERT_FILE.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_proxy.ca))
    start, _ = tls_proxy.snapshot()
    backend = backend_module.OpenSandboxBackend.create(
        domain=tls_proxy.domain, use_server_proxy=True, image=sandbox_image
    )
    try:
        response = backend.execute("echo hello; echo oops >&2")
        assert response.exit_code == 0
        assert "hello" in response.output and "oops" in response.output
        payload = os.urandom(200_000)
        uploads = backend.upload_files([("/workspace/x.bin", payload)])
        assert [u.error for u in uploads] == [None]
        downloads = backend.download_files(["/workspace/x.bin"])
        assert [(d.error, d.content) for d in downloads] == [(None, payload)]
        sandbox_id = backend.id
    finally:
        backend.kill()
    seen = tls_proxy.since(start)
    assert {scheme for scheme, _, _ in seen} == {"https"}
    proxied = f"/v1/sandboxes/{sandbox_id}/proxy/44772"
    paths = {path for _, _, path in seen}
    assert {f"{proxied}/command", f"{proxied}/files/upload", f"{proxied}/files/download"} <= paths


async def test_pydantic_ai_backend_over_https(tls_proxy: TlsProxy, sandbox_image: str) -> None:
    adapter = pytest.importorskip("pydantic_ai_opensandbox")
    from opensandbox.config import ConnectionConfig

    transport = RecordingTransport(tls_proxy.ca)
    start, _ = tls_proxy.snapshot()
    backend = adapter.OpenSandboxBackend(
        image=sandbox_image,
        connection=ConnectionConfig(
            domain=tls_proxy.domain,
            protocol="https",
            use_server_proxy=True,
            transport=transport,
            api_key=os.environ.get("OPEN_SANDBOX_API_KEY"),
        ),
    )
    try:
        result = await backend.run(["sh", "-c", "printf 'x\\n\\ny'"])
        assert (result.exit_code, result.stdout) == (0, "x\n\ny")
        data = os.urandom(1024 * 1024) + uuid.uuid4().bytes
        await backend.write_bytes("p/q.bin", data)
        assert await backend.read_bytes("p/q.bin") == data
        sandbox_id = backend.session.id
    finally:
        await backend.session.destroy()
        await backend.aclose()
        await transport.aclose()
    _assert_all_through_proxy(tls_proxy, transport.urls)
    seen = tls_proxy.since(start)
    assert {scheme for scheme, _, _ in seen} == {"https"}
    proxied = f"/v1/sandboxes/{sandbox_id}/proxy/44772"
    paths = {path for _, _, path in seen}
    assert {f"{proxied}/command", f"{proxied}/files/upload", f"{proxied}/files/download"} <= paths
