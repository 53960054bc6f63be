"""Providers' batch APIs, reached through LiteLLM: upload, create, retrieve, download, list.

A batch run (`binaryeval_dspy.engines.batch`) sends the judge's requests as one JSONL
file to a provider's batch API instead of one HTTP call each, typically at half the
price and within 24 hours. This module is the thin, provider-facing layer:

* `batch_target` says where an LM's batches go (provider, base URL, model name in the
  request bodies), or refuses an LM whose provider has no batch API reachable here;
* `BatchAPI` wraps ``litellm.create_file`` / ``create_batch`` / ``retrieve_batch`` /
  ``file_content`` / ``list_batches`` and returns plain `BatchInfo` records.

Supported: OpenAI (``--lm openai/<model>``; ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``
honoured), and any OpenAI-compatible server given as a base URL (``--lm
http://host/v1 --lm-model NAME``) that implements OpenAI's ``/v1/files`` and
``/v1/batches`` (a LiteLLM proxy does; the tests use a local fake). Not supported:
Anthropic Message Batches (LiteLLM 1.110 can retrieve them and download their results,
but ``create_batch`` for Anthropic is not implemented: ``AnthropicBatchesConfig.
transform_create_batch_request`` raises NotImplementedError), and Azure, Vertex AI,
Bedrock, Mistral, Gemini and xAI, whose request lines differ from OpenAI's and are not
built here.

The API key is passed to LiteLLM per call and never kept in a `BatchTarget` (which is
written to the run directory): the target records the *name* of the variable it comes
from. Batch creation is sent exactly once (``max_retries=0``): a retried create whose
first answer was lost could start the same batch twice; the run directory's journal
settles such an ambiguous create instead (see `binaryeval_dspy.engines.batch`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binaryeval_dspy.cost.price_map import litellm_version
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.endpoint_identity import endpoint_identity
from binaryeval_dspy.lm.factory import OPENAI_COMPATIBLE, LMHandle

#: The endpoint every request line targets.
CHAT_ENDPOINT = "/v1/chat/completions"
#: OpenAI's only completion window.
COMPLETION_WINDOW = "24h"
#: Batch statuses after which nothing changes any more.
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchTarget:
    """Where a run's batches go. Holds no secret: it is written to the run directory.

    Attributes:
        provider: LiteLLM provider name (``"openai"``).
        api_base: the base URL given explicitly (``--lm URL``, the LM's ``api_base`` or
            ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``), or None for the provider's own.
        endpoint: the normalized endpoint identity (``endpoint=<url>`` or
            ``provider-default=openai``), compared on resume.
        model: the model name written in each request body (``gpt-4o-mini``, the
            served name at a base URL).
        api_key_env: the environment variable the key is read from, or None (a base
            URL without a key; OpenAI's own variable for ``openai/...``).
    """

    provider: str
    api_base: str | None
    endpoint: str
    model: str
    api_key_env: str | None


def batch_target(handle: LMHandle, *, api_key_env: str | None = None, engine: str = "batch") -> BatchTarget:
    """Where `handle`'s batches go, or a refusal naming what is supported.

    Also where the ``ray`` engine sends its prepared requests (an OpenAI-compatible
    endpoint: the same forms, without needing the batch API itself).

    Args:
        handle: the LM of the run (from `make_lm`).
        engine: the engine asking (``batch`` or ``ray``), named in refusals.
        api_key_env: the ``--api-key-env`` of a base-URL LM (the key's variable), if any.

    Raises:
        LMConfigError: an embedded model, or a provider without a batch API reachable
            here (the message lists the supported forms).
    """
    lm = handle.lm
    model = str(getattr(lm, "model", ""))
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    if handle.embedded:
        raise LMConfigError(
            f"the {engine} engine sends requests to an endpoint, but {handle.name} is an embedded model run in this "
            "process.", fix="use the local engine, or a served model (openai/<model>, or an OpenAI-compatible base "
                            "URL).")
    provider, _, wire = model.partition("/")
    if provider in (OPENAI_COMPATIBLE, "openai") and kwargs.get("api_base"):
        api_base = str(kwargs["api_base"])
        return BatchTarget(provider="openai", api_base=api_base, endpoint=endpoint_identity("openai/x", kwargs),
                           model=wire, api_key_env=api_key_env)
    if provider == "openai" and wire:
        api_base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None
        return BatchTarget(provider="openai", api_base=api_base, endpoint=endpoint_identity(model, kwargs),
                           model=wire, api_key_env="OPENAI_API_KEY")
    extra = (" LiteLLM can read Anthropic Message Batches but cannot create them (not implemented in LiteLLM "
             f"{litellm_version()})." if provider == "anthropic" else "")
    if engine != "batch":
        raise LMConfigError(
            f"the {engine} engine: {handle.name} has no OpenAI-compatible endpoint it can reach. Supported: an "
            "openai/<model> id, or an OpenAI-compatible base URL with a model name (vLLM, llama.cpp's server, a "
            "LiteLLM proxy in front of any provider).", fix="use one of those, or the live engine.")
    raise LMConfigError(
        f"the batch engine: {handle.name} is not reachable through a batch API here.{extra} Supported: an "
        "openai/<model> id (OpenAI's Batch API), or an OpenAI-compatible base URL with a model name whose server "
        "implements /v1/files and /v1/batches (e.g. a LiteLLM proxy).",
        fix="use one of those, or the live engine.")


@dataclass(frozen=True)
class BatchInfo:
    """A provider's batch as last seen (OpenAI's batch object, normalized).

    Attributes:
        id: the provider's batch id.
        status: ``validating``, ``in_progress``, ``finalizing``, ``completed``,
            ``failed``, ``expired``, ``cancelling`` or ``cancelled``.
        input_file_id / output_file_id / error_file_id: the files of the batch (the
            output and error files appear when it ends).
        created_at / expires_at / ended_at: Unix times (``ended_at``: when it completed,
            failed, expired or was cancelled), None when unknown.
        request_counts: ``{"total", "completed", "failed"}``.
        errors: the batch-level errors (a refused input file), as ``code: message`` lines.
        metadata: the metadata given at creation.
    """

    id: str
    status: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int | None = None
    expires_at: int | None = None
    ended_at: int | None = None
    request_counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """True once the batch can change no more (completed, failed, expired, cancelled)."""
        return self.status in TERMINAL_STATUSES


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def batch_info(raw: Any) -> BatchInfo:
    """A `BatchInfo` from LiteLLM's / the OpenAI SDK's batch object (or its JSON dict)."""
    counts_raw = _get(raw, "request_counts") or {}
    counts = {k: _int(_get(counts_raw, k)) or 0 for k in ("total", "completed", "failed")}
    errors_raw = _get(raw, "errors")
    data = _get(errors_raw, "data") if errors_raw is not None else None
    errors = []
    for entry in data or []:
        code, message, line = _get(entry, "code"), _get(entry, "message"), _get(entry, "line")
        where = f" (line {line})" if line is not None else ""
        errors.append(f"{code or 'error'}: {message or ''}{where}".strip())
    ended = next((_int(_get(raw, k)) for k in ("completed_at", "failed_at", "expired_at", "cancelled_at")
                  if _int(_get(raw, k)) is not None), None)
    metadata = _get(raw, "metadata") or {}
    return BatchInfo(
        id=str(_get(raw, "id")), status=str(_get(raw, "status") or "unknown"),
        input_file_id=_get(raw, "input_file_id"), output_file_id=_get(raw, "output_file_id"),
        error_file_id=_get(raw, "error_file_id"), created_at=_int(_get(raw, "created_at")),
        expires_at=_int(_get(raw, "expires_at")), ended_at=ended, request_counts=counts, errors=errors,
        metadata={str(k): str(v) for k, v in dict(metadata).items()},
    )


def create_was_refused(exc: BaseException) -> bool:
    """True when a failed create got the provider's answer (an HTTP error status), so no
    batch was created; False when the outcome is unknown (connection lost, timeout)."""
    try:
        import openai
    except ImportError:  # pragma: no cover - LiteLLM depends on openai
        return False
    return isinstance(exc, openai.APIStatusError) and not isinstance(exc, openai.InternalServerError)


class BatchAPI:
    """One provider's batch API through LiteLLM (files and batches).

    Args:
        target: where the batches go.
        api_key: the key to send (read by the caller from ``target.api_key_env`` or
            the LM); None lets LiteLLM read the provider's usual variable. Kept in
            memory only.
        timeout: seconds per HTTP request (None: LiteLLM's default).

    Every method raises what LiteLLM / the OpenAI SDK raise (connection errors, HTTP
    error statuses); callers decide what an error means for the run.
    """

    def __init__(self, target: BatchTarget, *, api_key: str | None = None, timeout: float | None = None) -> None:
        self.target = target
        self._api_key = api_key
        self._timeout = timeout

    @classmethod
    def for_handle(cls, target: BatchTarget, handle: LMHandle) -> BatchAPI:
        """The API for a run's LM: the LM's own key and timeout (never stored)."""
        kwargs = dict(getattr(handle.lm, "kwargs", {}) or {})
        key = kwargs.get("api_key")
        if key is None and target.api_key_env and target.api_key_env != "OPENAI_API_KEY":
            key = os.environ.get(target.api_key_env)
        return cls(target, api_key=key, timeout=kwargs.get("timeout"))

    @classmethod
    def from_environment(cls, target: BatchTarget) -> BatchAPI:
        """The API for a stored target, with the key read from ``target.api_key_env``
        (``bineval batch status``: no LM is built)."""
        key = os.environ.get(target.api_key_env) if target.api_key_env else None
        if key is None and target.api_base and not target.api_key_env:
            key = "not-needed"
        return cls(target, api_key=key)

    def _common(self) -> dict[str, Any]:
        out: dict[str, Any] = {"custom_llm_provider": self.target.provider}
        if self.target.api_base:
            out["api_base"] = self.target.api_base
        if self._api_key:
            out["api_key"] = self._api_key
        if self._timeout:
            out["timeout"] = self._timeout
        return out

    @staticmethod
    def _litellm() -> Any:
        from binaryeval_dspy.lm.dspy_internals import litellm_module

        return litellm_module()

    def upload(self, path: Path) -> str:
        """Upload a requests JSONL file (purpose ``batch``); returns its file id."""
        data = Path(path).read_bytes()
        created = self._litellm().create_file(file=(Path(path).name, data), purpose="batch", **self._common())
        return str(_get(created, "id"))

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchInfo:
        """Create a batch of chat completions from an uploaded file; sent once, never retried."""
        created = self._litellm().create_batch(
            completion_window=COMPLETION_WINDOW, endpoint=CHAT_ENDPOINT, input_file_id=input_file_id,
            metadata=metadata, max_retries=0, **self._common())
        return batch_info(created)

    def retrieve(self, batch_id: str) -> BatchInfo:
        """The batch as it is now."""
        return batch_info(self._litellm().retrieve_batch(batch_id=batch_id, **self._common()))

    def content(self, file_id: str) -> bytes:
        """The bytes of a file (a batch's output or error file)."""
        response = self._litellm().file_content(file_id=file_id, **self._common())
        content = _get(response, "content")
        if isinstance(content, (bytes, bytearray)):
            return bytes(content)
        text = _get(response, "text")
        return str(text if text is not None else content or "").encode("utf-8")

    def list(self, *, after: str | None = None, limit: int = 100) -> tuple[list[BatchInfo], bool]:
        """One page of the account's batches, newest first: (batches, whether more follow)."""
        page = self._litellm().list_batches(after=after, limit=limit, **self._common())
        data = _get(page, "data") or []
        return [batch_info(b) for b in data], bool(_get(page, "has_more"))
