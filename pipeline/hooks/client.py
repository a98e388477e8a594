"""A standard-library HTTP client for ``recall serve``'s ``POST /recall`` (the hooks run inside
other programs' processes: OKS, Hermes; they add no dependency there). A server bound off loopback
wants ``Authorization: Bearer <serve.token>``: the client sends ``token=`` or, without it, the
``RECALL_SERVE_TOKEN`` environment variable (the variable ``recall serve`` reads too)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from pipeline.contract.errors import ConfigError, UserError


class RecallServiceError(UserError):
    """``recall serve`` could not be reached or refused the request (its one-line reason)."""


class HttpRecaller:
    """``recall(text, scope, k, format)`` over ``POST {endpoint}/recall``; same dict as
    ``Service.recall``."""

    def __init__(self, endpoint: str, *, timeout: float = 30.0, token: str | None = None) -> None:
        endpoint = str(endpoint or "").strip().rstrip("/")
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"endpoint={endpoint!r} is not an absolute http(s) URL; "
                "write e.g. http://127.0.0.1:8765 (where `recall serve` listens)"
            )
        self.endpoint, self.timeout = endpoint, float(timeout)
        self.token = token or os.environ.get("RECALL_SERVE_TOKEN") or None

    def recall(
        self,
        text: str,
        scope: str | None = None,
        k: int | None = None,
        format: str = "rows",
        fields: dict | None = None,
    ) -> dict[str, Any]:
        """POST one recall (``fields``: the query's context, time, scene…, JSON-encoded with
        datetimes as ISO 8601); a 4xx/5xx or an unreachable server raises RecallServiceError."""
        body = {"text": text, "format": format}
        body.update({key: v for key, v in (("scope", scope), ("k", k)) if v is not None})
        if fields:
            body["fields"] = {key: _plain(v) for key, v in fields.items()}
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(
            f"{self.endpoint}/recall",
            data=json.dumps(body, ensure_ascii=False).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace")[:300]
            raise RecallServiceError(f"{self.endpoint}/recall: HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RecallServiceError(
                f"{self.endpoint}/recall: {reason}; is `recall serve` running there?"
            ) from exc


def _plain(value):
    """A query field as JSON: a datetime as ISO 8601, a tuple as a list."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return list(value) if isinstance(value, tuple) else value
