"""dse.cluster.ray_auth against a stand-in GCS: which token a driver finds, when it turns token mode on, and the
one line it gives when the token is missing or refused.

The stand-in is a gRPC server that answers Ray's ``NodeInfoGcsService.GetClusterId`` as a token-authenticated
GCS does: ``UNAUTHENTICATED`` unless the call carries ``authorization: Bearer <its token>`` (or it answers
every call, for a cluster without authentication). Turning token mode on is recorded instead of done,
so the session's embedded Ray keeps its configuration. The same paths against a real Ray head with token
authentication on: ``tests/test_ray_cluster.py``.
"""

from __future__ import annotations

from concurrent import futures

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("ray")
from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc  # noqa: E402

from dse.cluster import ray_auth  # noqa: E402
from dse.errors import UserError  # noqa: E402

TOKEN = "0123456789abcdef" * 4


class _Gcs(gcs_service_pb2_grpc.NodeInfoGcsServiceServicer):
    def __init__(self, token: str | None):
        self.token = token

    def GetClusterId(self, request, context):
        given = dict(context.invocation_metadata()).get("authorization")
        if self.token is not None and given != f"Bearer {self.token}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken: Authentication token is missing or incorrect")
        return gcs_service_pb2.GetClusterIdReply(cluster_id=b"\x01" * 28)


def _serve(token: str | None):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    gcs_service_pb2_grpc.add_NodeInfoGcsServiceServicer_to_server(_Gcs(token), server)
    port = server.add_insecure_port("0.0.0.0:0")  # Ray resolves 127.0.0.1 to the node's address
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No token anywhere (an empty HOME, Ray's variables unset); token mode switched on is recorded."""
    for name in (ray_auth.TOKEN_ENV, ray_auth.TOKEN_PATH_ENV, ray_auth.MODE_ENV, "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    enabled = []
    monkeypatch.setattr(ray_auth, "_enable_token_mode", lambda: enabled.append(True))
    return enabled


@pytest.fixture
def token_gcs():
    server, address = _serve(TOKEN)
    yield address
    server.stop(None)


@pytest.fixture
def open_gcs():
    server, address = _serve(None)
    yield address
    server.stop(None)


def _home_token(tmp_path, text: str):
    path = tmp_path / "home" / ".ray" / "auth_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_token_sources_in_rays_order(env, monkeypatch, tmp_path):
    """RAY_AUTH_TOKEN, then the file RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token (Ray's token-
    authentication internals page, "Token Sources and Precedence"); surrounding whitespace dropped."""
    assert ray_auth.find_token() is None
    home = _home_token(tmp_path, "home-token\n")
    assert ray_auth.find_token() == ("home-token", str(home))
    named = tmp_path / "named"
    named.write_text("  named-token\n\n")
    monkeypatch.setenv(ray_auth.TOKEN_PATH_ENV, str(named))
    assert ray_auth.find_token() == ("named-token", f"RAY_AUTH_TOKEN_PATH={named}")
    monkeypatch.setenv(ray_auth.TOKEN_ENV, "env-token")
    assert ray_auth.find_token() == ("env-token", "RAY_AUTH_TOKEN")
    monkeypatch.setenv(ray_auth.TOKEN_ENV, "  ")  # empty: the next source
    assert ray_auth.find_token() == ("named-token", f"RAY_AUTH_TOKEN_PATH={named}")


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_an_unreadable_or_empty_token_path_is_one_line(env, monkeypatch, tmp_path, content):
    """Ray aborts the process when RAY_AUTH_TOKEN_PATH cannot be read or is empty; here it is one line."""
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv(ray_auth.TOKEN_PATH_ENV, str(path))
    with pytest.raises(UserError, match="RAY_AUTH_TOKEN_PATH") as info:
        ray_auth.find_token()
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_cluster_without_authentication_is_joined_as_it_is(env, open_gcs, monkeypatch):
    monkeypatch.setenv(ray_auth.TOKEN_ENV, TOKEN)
    assert ray_auth.probe(open_gcs, None) == "ok"
    assert ray_auth.join_with_token(open_gcs) == "" and env == []


def test_the_token_from_the_environment_turns_token_mode_on(env, token_gcs, monkeypatch):
    assert ray_auth.probe(token_gcs, None) == "unauthenticated"
    assert ray_auth.probe(token_gcs, TOKEN) == "ok"
    monkeypatch.setenv(ray_auth.TOKEN_ENV, TOKEN)
    assert ray_auth.join_with_token(token_gcs) == "token from RAY_AUTH_TOKEN"
    assert env == [True]


def test_the_token_file_in_home_is_found(env, token_gcs, tmp_path):
    path = _home_token(tmp_path, TOKEN + "\n")
    assert ray_auth.join_with_token(token_gcs) == f"token from {path}"
    assert env == [True]


def test_a_missing_token_is_one_line_naming_what_to_set(env, token_gcs):
    with pytest.raises(UserError) as info:
        ray_auth.join_with_token(token_gcs)
    text = str(info.value)
    assert text.startswith(f"--address: the Ray cluster at {token_gcs} requires its authentication token and none")
    assert all(name in text for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token")) and "\n" not in text
    assert env == []


def test_a_wrong_token_is_one_line_naming_its_source(env, token_gcs, monkeypatch, tmp_path):
    monkeypatch.setenv(ray_auth.TOKEN_ENV, "not-the-token")
    with pytest.raises(UserError, match="refused the authentication token from RAY_AUTH_TOKEN: set RAY_AUTH_TOKEN"):
        ray_auth.join_with_token(token_gcs)
    monkeypatch.delenv(ray_auth.TOKEN_ENV)
    path = _home_token(tmp_path, "stale")
    with pytest.raises(UserError, match=f"refused the authentication token from {path}:"):
        ray_auth.join_with_token(token_gcs)
    assert env == []


def test_auth_mode_disabled_here_is_named(env, token_gcs, monkeypatch):
    """An explicit RAY_AUTH_MODE=disabled is respected, and named as the reason."""
    monkeypatch.setenv(ray_auth.TOKEN_ENV, TOKEN)
    monkeypatch.setenv(ray_auth.MODE_ENV, "disabled")
    with pytest.raises(UserError, match="RAY_AUTH_MODE=disabled here forbids sending it: unset RAY_AUTH_MODE"):
        ray_auth.join_with_token(token_gcs)
    assert env == []


def test_no_answer_is_one_line_before_ray_init(env, monkeypatch):
    """A closed port: one line naming the address (issue 27: ray.init retried for minutes), no token mode set."""
    server, address = _serve(TOKEN)
    server.stop(None)
    monkeypatch.setenv(ray_auth.TOKEN_ENV, TOKEN)
    assert ray_auth.probe(address, TOKEN, timeout_s=2) == "unreachable"
    with pytest.raises(UserError, match=f"no Ray cluster answers at {address}"):
        ray_auth.join_with_token(address)
    assert env == []


def test_a_ray_client_address_presents_a_token_at_hand(env, monkeypatch):
    """ray:// has no GCS to ask: a token at hand is presented (a cluster without authentication ignores it)."""
    assert ray_auth.join_with_token("ray://head:10001") == "" and env == []
    monkeypatch.setenv(ray_auth.TOKEN_ENV, TOKEN)
    assert ray_auth.join_with_token("ray://head:10001") == "token from RAY_AUTH_TOKEN" and env == [True]


def test_an_authentication_error_from_ray_init_is_one_line(env, monkeypatch):
    from ray.exceptions import AuthenticationError

    missing = ray_auth.explain(AuthenticationError("Token authentication is enabled but no token"), "h:1")
    assert str(missing).startswith("--address: the Ray cluster at h:1 asks for an authentication token and none")
    monkeypatch.setenv(ray_auth.TOKEN_ENV, "x")
    refused = ray_auth.explain(ConnectionError("Unauthenticated: RPC error: InvalidAuthToken"), "h:1")
    assert "refused the authentication token from RAY_AUTH_TOKEN" in str(refused)
    assert ray_auth.explain(ConnectionError("Failed to connect to Ray cluster at h:1"), "h:1") is None
