"""Joining a Ray cluster that has token authentication on: find the cluster's token, present it, and say in
one line when it is missing or wrong.

Ray (2.52 and later; Ray's "Token authentication" internals page, docs.ray.io ray-core/internals) protects
every RPC and HTTP entry point of a cluster started with ``RAY_AUTH_MODE=token`` with one static bearer
token. A process presents the token only when it runs in token mode itself, and Ray 2.60 turns token mode
on by itself for a driver only when it joins with ``address="auto"`` (``ray/_private/worker.py``, ``init``):
a driver given ``--address host:port`` with the token at hand but ``RAY_AUTH_MODE`` unset is refused by the
cluster, after about 20 s of retries and twenty lines of C++ warnings.

So before ``ray.init(address=...)`` the driver asks the cluster's GCS directly (one
``NodeInfoGcsService.GetClusterId`` call, as Ray's own GCS client does first) whether it answers without a
token. If it does not, the driver takes the token from where Ray reads it, in Ray's order (the same page,
"Token Sources and Precedence"): ``RAY_AUTH_TOKEN``, the file named by ``RAY_AUTH_TOKEN_PATH``, then
``~/.ray/auth_token``; checks it with the same call, and turns token mode on for this process (and the
processes it starts) as Ray does for ``address="auto"``. A missing or refused token is a
:class:`dse.errors.UserError` that names what to set.

When each function is called: :func:`join_with_token` once per run, by :func:`dse.cluster.open_pool`, just
before ``ray.init(address=...)``; :func:`explain` when that ``ray.init`` raises. Every access to Ray's
private modules is in this module.
"""

from __future__ import annotations

import os
from pathlib import Path

from dse.errors import UserError

__all__ = ["TOKEN_ENV", "TOKEN_PATH_ENV", "MODE_ENV", "default_token_path", "find_token", "probe",
           "join_with_token", "explain"]

#: Ray's environment variables for token authentication (docs.ray.io, ray-security/token-auth)
TOKEN_ENV, TOKEN_PATH_ENV, MODE_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"

#: what a user sets, named in every error line
_HOW = (f"set {TOKEN_ENV} to the cluster's token (`ray get-auth-token` on the head node prints it), "
        f"or point {TOKEN_PATH_ENV} at a file holding it, or copy the head's ~/.ray/auth_token here")

#: seconds the driver waits for the GCS's answer to the probe
PROBE_TIMEOUT_S = 10.0


def default_token_path() -> Path:
    """Ray's default token file, ``~/.ray/auth_token`` (``ray/_private/authentication/authentication_token_setup.py``)."""
    return Path.home() / ".ray" / "auth_token"


def find_token() -> tuple[str, str] | None:
    """The token this process would present, and where it came from (a name for error lines), or None.

    Ray's order: ``RAY_AUTH_TOKEN`` if non-empty, else the file ``RAY_AUTH_TOKEN_PATH`` names (which must
    be readable and non-empty: Ray aborts the process otherwise, so this is a one-line error here), else
    ``~/.ray/auth_token`` if it exists. Surrounding whitespace is dropped (a file written by ``echo``).
    """
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token, TOKEN_ENV
    path_text = os.environ.get(TOKEN_PATH_ENV)
    if path_text:
        try:
            token = Path(path_text).expanduser().read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read the Ray token file {path_text}: {exc.strerror or exc}",
                            where=TOKEN_PATH_ENV) from None
        if not token:
            raise UserError(f"the Ray token file {path_text} is empty", where=TOKEN_PATH_ENV)
        return token, f"{TOKEN_PATH_ENV}={path_text}"
    path = default_token_path()
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (token, str(path)) if token else None


def probe(gcs_address: str, token: str | None, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Ask the GCS at ``host:port`` for its cluster id, presenting ``token`` (or none).

    Returns ``"ok"`` (answered), ``"unauthenticated"`` (the token is required and missing, or wrong) or
    ``"unreachable"`` (no answer: :func:`join_with_token` says so in one line). The header is Ray's:
    ``authorization: Bearer <token>`` (``ray/_private/authentication/authentication_constants.py``).
    """
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.insecure_channel(gcs_address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s, metadata=metadata)
        except grpc.RpcError as exc:
            return "unauthenticated" if exc.code() == grpc.StatusCode.UNAUTHENTICATED else "unreachable"
    return "ok"


def _gcs_address(address: str) -> str | None:
    """``host:port`` of the GCS that ``ray.init(address=address)`` joins, or None (a ``ray://`` client
    address, or ``auto`` with no cluster found)."""
    if address.startswith("ray://"):
        return None
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address)
    except Exception:  # no cluster found, or an address Ray cannot parse: ray.init says which
        return None


def _enable_token_mode() -> None:
    """Token mode for this process and its children, as Ray's ``_enable_token_auth`` does for
    ``address="auto"`` (``ray/_private/authentication/authentication_token_setup.py``): the environment
    variable, then Ray's cached config and token re-read."""
    os.environ[MODE_ENV] = "token"
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def join_with_token(address: str) -> str:
    """Make this process present the cluster's token if the cluster at ``address`` asks for one.

    Returns what was done, for the run's description: ``""`` (no token asked or none at hand for a
    ``ray://`` client) or ``"token from <source>"``. Raises :class:`UserError` when the cluster asks for a
    token and none is found, the one found is refused, or ``RAY_AUTH_MODE`` forbids presenting it.
    """
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    gcs = _gcs_address(address)
    if gcs is None:  # a Ray Client address (no GCS to ask): present a token when one is at hand
        found = find_token() if mode in ("", "token") else None
        if found:
            _enable_token_mode()
            return f"token from {found[1]}"
        return ""
    answer = probe(gcs, None)
    if answer == "unreachable":  # ray.init would retry for minutes (issue 27: --address 127.0.0.1:1 hung)
        raise UserError(f"no Ray cluster answers at {address} (its GCS at {gcs} did not reply within {PROBE_TIMEOUT_S:g} s): "
                        "start one there (ray start --head) or give the address `ray status` prints",
                        where="--address")
    if answer != "unauthenticated":
        return ""  # the cluster answers without a token
    if mode not in ("", "token"):
        raise UserError(f"the Ray cluster at {address} requires its authentication token, and "
                        f"{MODE_ENV}={os.environ[MODE_ENV]} here forbids sending it: unset {MODE_ENV} "
                        f"(or set it to token)", where="--address")
    found = find_token()
    if found is None:
        raise UserError(f"the Ray cluster at {address} requires its authentication token and none was found: "
                        f"{_HOW}", where="--address")
    token, source = found
    if probe(gcs, token) == "unauthenticated":
        raise UserError(f"the Ray cluster at {address} refused the authentication token from {source}: "
                        f"{_HOW}", where="--address")
    _enable_token_mode()
    return f"token from {source}"


def explain(exc: BaseException, address: str) -> UserError | None:
    """The one line for an authentication failure that ``ray.init(address=...)`` raised (a ``ray://``
    client, or ``RAY_AUTH_MODE=token`` here with no token at hand), or None for any other error."""
    from ray.exceptions import AuthenticationError

    text = str(exc)
    if not (isinstance(exc, AuthenticationError) or "InvalidAuthToken" in text or "UNAUTHENTICATED" in text.upper()):
        return None
    found = find_token()
    if found is None:
        return UserError(f"the Ray cluster at {address} asks for an authentication token and none was found: "
                         f"{_HOW}", where="--address")
    return UserError(f"the Ray cluster at {address} refused the authentication token from {found[1]}: {_HOW}",
                     where="--address")
