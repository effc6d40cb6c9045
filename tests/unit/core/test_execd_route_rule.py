"""The route to execd (`_lifecycle._reach`: `direct_endpoint`, `Route`, `Reach`, `wait_ready`):
which endpoints are reached at execd's root, how that is confirmed or refused, and that the
verdict is remembered per sandbox. The daemon is an `httpx.MockTransport` here; the live test
(`tests/live/core/test_execd_route.py`) shows the route on a real server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from opensandbox_core._lifecycle import _caches, _reach
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint

HEADERS = {"X-EXECD-ACCESS-TOKEN": "t0ken", "X-Extra": "kept"}


@pytest.mark.parametrize(
    ("base_url", "direct"),
    [
        ("http://127.0.0.1:40001/proxy/44772", "http://127.0.0.1:40001"),
        ("http://127.0.0.1:40001/proxy/44772/", "http://127.0.0.1:40001"),
        ("https://sandbox.example:443/proxy/44772", "https://sandbox.example:443"),
        ("http://[::1]:40001/proxy/44772", "http://[::1]:40001"),
        # the server's proxy (use_server_proxy) and anything with a path before /proxy/
        ("http://127.0.0.1:8080/v1/sandboxes/abc/proxy/44772", None),
        ("http://gw.example/sandboxes/abc/proxy/44772", None),
        # ingress forms, other ports, the root itself
        ("https://gw.example/abc/44772", None),
        ("http://127.0.0.1:40001/proxy/8080", None),
        ("http://127.0.0.1:40001/proxy/447720", None),
        ("http://127.0.0.1:40001", None),
        ("http://127.0.0.1:40001/proxy/44772?x=1", None),
    ],
)
def test_only_execd_own_proxy_path_at_the_root_is_reached_directly(
    base_url: str, direct: str | None
) -> None:
    found = _reach.direct_endpoint(ExecdEndpoint(base_url, HEADERS))
    if direct is None:
        assert found is None
    else:
        assert found is not None
        assert (found.base_url, dict(found.headers)) == (direct, HEADERS)


class _Daemon:
    """execd behind a host port: `/proxy/44772/...` always reaches it; the root answers as
    `root` says (200: execd itself; a status: something else; None: no answer)."""

    def __init__(self, root: int | None) -> None:
        self.root = root
        self.seen: list[tuple[str, dict[str, str]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.url.path, dict(request.headers)))
        if request.url.path == "/proxy/44772/ping":
            return httpx.Response(200)
        if self.root is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(self.root)

    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


def _factory(daemon: _Daemon) -> tuple[Callable[[ExecdEndpoint], ExecdClient], list[str]]:
    made: list[str] = []
    transport = httpx.MockTransport(daemon)

    def client_for(endpoint: ExecdEndpoint) -> ExecdClient:
        made.append(endpoint.base_url)
        return ExecdClient(endpoint, transport=transport, request_timeout=5)

    return client_for, made


GIVEN = ExecdEndpoint("http://127.0.0.1:40001/proxy/44772", HEADERS)


def _route(sandbox_id: str, given: ExecdEndpoint = GIVEN) -> _reach.Route:
    return _reach.Route(given, domain="test.domain", sandbox_id=sandbox_id)


@pytest.fixture
def sandbox_id() -> Iterator[str]:
    name = f"route-{uuid.uuid4().hex}"
    yield name
    _caches.forget("test.domain", name)


async def test_an_execd_answering_at_the_root_is_used_there_and_remembered(
    sandbox_id: str,
) -> None:
    daemon = _Daemon(root=200)
    client_for, made = _factory(daemon)
    reach = _reach.Reach(_route(sandbox_id), client_for)
    await reach.settle()
    assert reach.execd.endpoint.base_url == "http://127.0.0.1:40001"
    assert daemon.paths() == ["/ping"]
    assert daemon.seen[0][1]["x-execd-access-token"] == "t0ken"  # the endpoint's headers
    await reach.execd.aclose()
    # The next session on this sandbox takes the direct route without asking again.
    again = _reach.Reach(_route(sandbox_id), client_for)
    await again.settle()
    assert again.execd.endpoint.base_url == "http://127.0.0.1:40001"
    assert daemon.paths() == ["/ping"] and made == ["http://127.0.0.1:40001"] * 2
    await again.execd.aclose()


@pytest.mark.parametrize("status", [404, 401, 502])
async def test_anything_else_at_the_root_keeps_the_endpoint_as_given(
    sandbox_id: str, status: int
) -> None:
    daemon = _Daemon(root=status)
    client_for, made = _factory(daemon)
    reach = _reach.Reach(_route(sandbox_id), client_for)
    await reach.settle()
    assert reach.execd.endpoint == GIVEN
    assert daemon.paths() == ["/ping", "/proxy/44772/ping"]
    await reach.execd.aclose()
    again = _reach.Reach(_route(sandbox_id), client_for)
    await again.settle()  # remembered: no request
    assert again.execd.endpoint == GIVEN and len(daemon.seen) == 2
    assert made[-1] == GIVEN.base_url
    await again.execd.aclose()


async def test_no_answer_at_the_root_falls_back_without_a_verdict(sandbox_id: str) -> None:
    daemon = _Daemon(root=None)
    client_for, _ = _factory(daemon)
    reach = _reach.Reach(_route(sandbox_id), client_for)
    await reach.settle()
    assert reach.execd.endpoint == GIVEN
    await reach.execd.aclose()
    assert _reach.Route(GIVEN, domain="test.domain", sandbox_id=sandbox_id).trying_direct


async def test_other_forms_send_no_extra_request(sandbox_id: str) -> None:
    given = ExecdEndpoint("http://127.0.0.1:8080/v1/sandboxes/abc/proxy/44772", HEADERS)
    daemon = _Daemon(root=200)
    client_for, made = _factory(daemon)
    reach = _reach.Reach(_route(sandbox_id, given), client_for)
    await reach.settle()
    assert reach.execd.endpoint == given and daemon.seen == [] and made == [given.base_url]
    await reach.execd.aclose()


async def test_a_new_sandbox_is_waited_for_at_the_root_and_falls_back_on_a_refusal(
    sandbox_id: str,
) -> None:
    daemon = _Daemon(root=None)  # starting: nothing answers yet
    client_for, _ = _factory(daemon)
    reach = _reach.Reach(_route(sandbox_id), client_for)
    assert not await reach.ping(timeout=1)
    assert reach.route.trying_direct  # no answer is no verdict
    daemon.root = 404  # an answer that is not execd's: the endpoint as given is asked at once
    assert await reach.ping(timeout=1)
    assert reach.execd.endpoint == GIVEN
    assert daemon.paths() == ["/ping", "/ping", "/proxy/44772/ping"]
    await reach.execd.aclose()
