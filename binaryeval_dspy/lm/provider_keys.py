"""What an ``--lm`` value needs, checked before any call: a hosted model id's key, a base URL's server.

LiteLLM knows each provider's key variable; a missing one is said up front (naming the
variable and how to set it) instead of after the first item fails. A base URL where
nothing listens (connection refused, a host name that does not resolve) is said up front
too, instead of after every question of three items has been retried with backoff.
"""

from __future__ import annotations

import os
import re
import socket
from urllib.parse import urlsplit

from binaryeval_dspy.errors import LMConfigError

#: the embedded model's name on the command line (``--lm local``)
LOCAL = "local"
#: a LiteLLM model id: ``provider/model``
LITELLM_ID = re.compile(r"^[A-Za-z0-9_.\-]+/\S+$")

_CREDENTIAL_CHAIN_PREFIXES = ("bedrock", "sagemaker", "vertex_ai", "azure", "ollama", "watsonx", "snowflake",
                              "oci", "github_copilot", "hosted_vllm", "lm_studio", "llamafile", "custom")
# Other variables the provider's clients also read for the same key.
_ALSO_READ = {"HUGGINGFACE_API_KEY": ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}


def missing_provider_keys(spec: str) -> list[str]:
    """The API-key variables LiteLLM reports missing for a LiteLLM model id, else [].

    Uses ``litellm.validate_environment(spec)``, trusted only where its answer is a
    plain API key: [] for base URLs, ``local`` and ``.gguf`` paths, providers whose
    credentials may come from elsewhere (AWS / Google / Azure credential chains, local
    servers), when any reported variable is not an ``*_API_KEY`` (an endpoint address, a
    project), when ``litellm.api_key`` is set, or when LiteLLM cannot tell.

    Returns:
        The variables of which (at least) one must be set, e.g. ``["OPENAI_API_KEY"]``;
        a provider read from either of two names lists both.
    """
    spec = (spec or "").strip()
    if (not LITELLM_ID.match(spec) or spec == LOCAL or spec.endswith(".gguf")
            or spec.lower().startswith(("http://", "https://"))):
        return []
    provider = spec.split("/", 1)[0].lower()
    if provider.startswith(_CREDENTIAL_CHAIN_PREFIXES):
        return []
    try:
        from binaryeval_dspy.lm.dspy_internals import litellm_module

        litellm = litellm_module()
        if getattr(litellm, "api_key", None):
            return []
        report = litellm.validate_environment(model=spec)
    except Exception:  # noqa: BLE001 - an id LiteLLM cannot place: nothing to say before the first call
        return []
    if not isinstance(report, dict) or report.get("keys_in_environment", True):
        return []
    missing = [str(k) for k in report.get("missing_keys") or []]
    if not missing or not all(k.endswith("_API_KEY") for k in missing):
        return []
    if any(os.environ.get(alt) for k in missing for alt in _ALSO_READ.get(k, ())):
        return []
    return missing


def check_provider_key(spec: str) -> None:
    """Refuse a LiteLLM model id whose API key is missing, before any model call.

    Without this, every item of a run fails in turn with the provider's error. Base
    URLs, ``local`` and ``.gguf`` paths are never checked (see `missing_provider_keys`).

    Args:
        spec: the model, as `make_lm` takes it (named `spec` in the message).

    Raises:
        LMConfigError: LiteLLM reports the provider's key variable unset; the message
            names the variable(s).
    """
    missing = missing_provider_keys(spec)
    if not missing:
        return
    names = missing[0] if len(missing) == 1 else " or ".join(missing)
    raise LMConfigError(
        f"`spec` {spec}: the provider's API key is missing ({names} is not set in the environment, as "
        "LiteLLM reports). Nothing was judged.",
        fix=f"export {missing[0]}=... and rerun; or use `spec` local, or a served model's base URL with `model`.",
    )


def check_endpoint_address(spec: str, *, timeout: float = 5.0) -> None:
    """Refuse a base URL where nothing listens, before any model call.

    Opens (and closes) one TCP connection to the URL's host and port. Only definite
    answers refuse: the connection is refused, the host name does not resolve, or an
    ``https://`` URL's server answers the TLS greeting in plain HTTP. A slow
    or silent network (a connect timeout, a firewall dropping packets) is left to the
    run's own timeouts and retries. Anything but an http(s) URL is not checked.

    Args:
        spec: the model, as `make_lm` takes it (named `spec` in the message).
        timeout: seconds to wait for the connection.

    Raises:
        LMConfigError: the connection was refused, the host is unknown, or https:// was
            given for a plain-HTTP server; the message names the address.
    """
    if not spec.lower().startswith(("http://", "https://")):
        return
    try:
        url = urlsplit(spec)
        host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return  # a malformed URL is refused, with its own message, where the LM is built
    if not host:
        return
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        reason = f"nothing listens at {host}:{port} (connection refused)"
    except socket.gaierror:
        reason = f"the host name {host!r} does not resolve"
    except OSError:
        return  # slow, filtered or otherwise unclear: the run's timeouts decide
    else:
        if url.scheme != "https" or not _speaks_plain_http(connection, host, timeout):
            connection.close()
            return
        raise LMConfigError(
            f"`spec` {spec}: {host}:{port} answers plain HTTP, not HTTPS. Nothing was judged.",
            fix=f"use http://{spec.split('://', 1)[1]}, then rerun.")
    raise LMConfigError(
        f"`spec` {spec}: {reason}. Nothing was judged.",
        fix="check the host and port in `spec` and that the server is running (e.g. curl "
            f"{spec.rstrip('/')}/models), then rerun.",
    )


def _speaks_plain_http(connection: socket.socket, host: str, timeout: float) -> bool:
    """True when the server on `connection` answers a TLS handshake with plain HTTP (an
    ``https://`` URL for an ``http://`` server); closes the connection. Any other outcome
    (a handshake that works, or fails otherwise) is False: left to the run."""
    import ssl

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # only the protocol is checked
    try:
        with context.wrap_socket(connection, server_hostname=host) as tls:
            tls.settimeout(timeout)
    except ssl.SSLError as exc:
        return "WRONG_VERSION_NUMBER" in str(exc) or "http request" in str(exc).lower()
    except OSError:
        return False
    finally:
        connection.close()
    return False
