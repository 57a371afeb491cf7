"""Canvas's REST API, the one call the grader makes: a file attached to a submission comment, for one student.

Canvas documents it as three requests (Submission Comments API, `create_file`, and the File Uploads guide):

1. `POST /api/v1/courses/:course_id/assignments/:assignment_id/submissions/:user_id/comments/files` with the file's
   `name`, `size` and `content_type` (form-encoded): Canvas answers `upload_url` and `upload_params`.
2. `POST upload_url` as multipart/form-data: every `upload_params` pair first, then the file (last). Canvas answers
   the file's JSON (200/201), or a 3xx redirect whose `Location` must be followed with a GET to complete the upload
   (201 with a `Location` and no body: the same GET returns the file's JSON).
3. `PUT /api/v1/courses/:course_id/assignments/:assignment_id/submissions/:user_id` with `comment[file_ids][]` and
   `comment[text_comment]` (form-encoded): the comment, with the file attached, on that student's submission.

Only the standard library (urllib). The instructor's token goes in an `Authorization: Bearer` header to the Canvas
host given and to nothing else (the upload URL may be another host's storage: it gets the upload's own parameters,
never the token), no redirect is followed blindly, and every address must be HTTPS (plain HTTP only on this machine's
loopback, for a local test server). Every failure is a `CanvasError` in one sentence, never a traceback; the token
never appears in one.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from grader.common.safe_text import visible

TIMEOUT_S = 60.0
SHOWN_CHARS = 200          # of Canvas's own error text, in a student's line of the summary
USER_AGENT = "jax-course-grader (grader release)"


class CanvasError(Exception):
    """One request failed: `status` (HTTP status, or None for the network) and a sentence saying what happened."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class CanvasAuthError(CanvasError):
    """Canvas refused the token (401): every later request would fail the same way."""


@dataclass(frozen=True)
class Posted:
    """What a comment with a file left on Canvas."""

    file_id: str
    comment_id: str | None


def address_problem(url: str) -> str | None:
    """Why `url` may not be used (None when it may): HTTPS only, plain HTTP only to this machine's loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and _loopback(parts.hostname or ""):
        return None
    return f"{visible(url[:200])} is not an HTTPS address (plain HTTP is allowed only to localhost, for a test server)"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as the answer: the client decides where to go and what to send there."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):   # noqa: ANN001 -- urllib's signature
        return None


class CanvasClient:
    """One Canvas (`base_url`, e.g. https://canvas.example.edu) and one token."""

    def __init__(self, base_url: str, token: str, timeout: float = TIMEOUT_S):
        problem = address_problem(base_url)
        if problem:
            raise CanvasError(problem)
        if not token or any(not (" " < c < "\x7f") for c in token):
            raise CanvasAuthError("the token holds characters no Canvas token has (spaces, control or non-ASCII "
                                  "characters): copy it again")
        self.base = base_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        handlers: list[Any] = [_NoRedirects()]
        if _loopback(urllib.parse.urlsplit(self.base).hostname or ""):
            handlers.append(urllib.request.ProxyHandler({}))   # a local server is never reached through a proxy
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:   # the token never shows, not even in a debugger's view
        return f"CanvasClient({self.base!r})"

    def comment_with_file(self, course: str, assignment: str, user_id: str, name: str, data: bytes,
                          content_type: str, text: str) -> Posted:
        """The three documented steps for one student; raises CanvasError (CanvasAuthError for a refused token)."""
        submission = (f"{self.base}/api/v1/courses/{_part(course)}/assignments/{_part(assignment)}/submissions/"
                      f"{_part(user_id)}")
        ticket = self._json("POST", f"{submission}/comments/files", _form(
            [("name", name), ("size", str(len(data))), ("content_type", content_type)]), "asking to upload the page")
        upload_url, params = ticket.get("upload_url"), ticket.get("upload_params")
        if not isinstance(upload_url, str) or not isinstance(params, dict):
            raise CanvasError("Canvas's answer to the upload request has no upload_url and upload_params")
        uploaded = self._upload(upload_url, {str(k): str(v) for k, v in params.items()}, name, data, content_type)
        file_id = uploaded.get("id")
        if file_id is None:
            raise CanvasError("Canvas confirmed the upload without the file's id")
        answer = self._json("PUT", submission, _form([("comment[file_ids][]", str(file_id)),
                                                      ("comment[text_comment]", text)]), "posting the comment")
        return Posted(str(file_id), _comment_id(answer, str(file_id)))

    # ---- the requests ---------------------------------------------------------------------------------------

    def _upload(self, url: str, params: dict[str, str], name: str, data: bytes, content_type: str) -> dict:
        problem = address_problem(url)
        if problem:
            raise CanvasError(f"Canvas gave an upload address that is not used: {problem}")
        body, form_type = _multipart(params, name, data, content_type)
        status, headers, answer = self._send("POST", url, body, {"Content-Type": form_type}, "uploading the page",
                                             token=False)   # the upload carries its own parameters, never the token
        location = headers.get("Location")
        if 300 <= status < 400 or (status == 201 and location and not answer.strip()):
            if not location:
                raise CanvasError(f"Canvas redirected the upload ({status}) without a Location to confirm it at")
            location = urllib.parse.urljoin(url, location)
            problem = address_problem(location)
            if problem:
                raise CanvasError(f"Canvas's upload confirmation address is not used: {problem}")
            status, headers, answer = self._send("GET", location, None, {}, "confirming the upload")
            if 300 <= status < 400:
                raise CanvasError(f"confirming the upload was redirected again ({status}); nothing was attached")
        return _parsed(answer, "the upload")

    def _json(self, method: str, url: str, body: bytes, doing: str) -> dict:
        status, _, answer = self._send(method, url, body, {"Content-Type": "application/x-www-form-urlencoded"}, doing)
        if 300 <= status < 400:
            raise CanvasError(f"Canvas answered {status} (a redirect) while {doing}: is --canvas-url the Canvas "
                              "address itself (https://canvas.example.edu)?", status)
        return _parsed(answer, doing)

    def _send(self, method: str, url: str, body: bytes | None, headers: dict[str, str], doing: str,
              token: bool = True) -> tuple[int, Any, bytes]:
        request = urllib.request.Request(url, data=body, method=method, headers={"User-Agent": USER_AGENT,
                                                                                  "Accept": "application/json", **headers})
        if token and _origin(url) == _origin(self.base):   # the token goes to the Canvas host given, never elsewhere
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            if 300 <= error.code < 400:
                return error.code, error.headers, error.read() if error.fp else b""
            raise self._refusal(error, doing) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = str(getattr(error, "reason", error)).replace(self._token, "[token]")
            raise CanvasError(f"no answer from {visible(_host(url))} while {doing} ({visible(reason)[:SHOWN_CHARS]})"
                              ) from None

    def _refusal(self, error: urllib.error.HTTPError, doing: str) -> CanvasError:
        try:
            text = error.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        said = _canvas_message(text).replace(self._token, "[token]") if self._token else _canvas_message(text)
        said = visible(said)[:SHOWN_CHARS]
        message = f"Canvas answered {error.code} {visible(str(error.reason))[:80]} while {doing}" + (f": {said}" if said else "")
        if error.code == 401:
            return CanvasAuthError(message, 401)
        return CanvasError(message, error.code)


def _part(value: str) -> str:
    return urllib.parse.quote(str(value), safe=":")


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url[:100]


def _form(pairs: list[tuple[str, str]]) -> bytes:
    return urllib.parse.urlencode(pairs).encode("ascii")


def _multipart(params: dict[str, str], name: str, data: bytes, content_type: str) -> tuple[bytes, str]:
    """multipart/form-data: the upload parameters in Canvas's order, then the file, last (as Canvas requires)."""
    boundary = "grader-" + secrets.token_hex(16)
    chunks = []
    for key, value in params.items():
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{_quoted(key)}"\r\n\r\n'.encode()
                      + value.encode("utf-8") + b"\r\n")
    chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{_quoted(name)}"\r\n'
                  f"Content-Type: {content_type}\r\n\r\n".encode() + data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _quoted(text: str) -> str:
    return text.replace("\\", "_").replace('"', "_").replace("\r", "_").replace("\n", "_")


def _parsed(answer: bytes, what: str) -> dict:
    text = answer.decode("utf-8", "replace").strip()
    if text.startswith("while(1);"):   # Canvas's guard against JSON hijacking, when it adds it
        text = text[len("while(1);"):]
    try:
        value = json.loads(text)
    except ValueError:
        raise CanvasError(f"Canvas's answer to {what} is not JSON ({visible(text[:80])!r}...)") from None
    if not isinstance(value, dict):
        raise CanvasError(f"Canvas's answer to {what} is not a JSON object")
    return value


def _canvas_message(text: str) -> str:
    """Canvas's own words from an error body ({"errors": [{"message": ...}]} or {"message": ...}), else its start."""
    try:
        value = json.loads(text.removeprefix("while(1);"))
    except ValueError:
        return " ".join(text.split())[:SHOWN_CHARS]
    if isinstance(value, dict):
        errors = value.get("errors")
        if isinstance(errors, list):
            return "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)
        if isinstance(errors, dict):
            return "; ".join(f"{key}: {item}" for key, item in errors.items())
        if value.get("message"):
            return str(value["message"])
    return " ".join(text.split())[:SHOWN_CHARS]


def _comment_id(submission: dict, file_id: str) -> str | None:
    """The id of the comment that carries `file_id` in Canvas's answer (the Submission, with its comments)."""
    comments = submission.get("submission_comments")
    if not isinstance(comments, list):
        return None
    carrying = [c for c in comments if isinstance(c, dict) and any(
        isinstance(a, dict) and str(a.get("id")) == file_id for a in c.get("attachments") or [])]
    chosen = carrying[-1] if carrying else None
    return str(chosen["id"]) if chosen and chosen.get("id") is not None else None
