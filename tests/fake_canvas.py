"""A local server that answers as Canvas documents its three requests for a file on a submission comment
(Submission Comments API `create_file`, the File Uploads guide, the Submissions API `update`): it checks the Bearer
token, hands out an upload address on itself, takes the multipart upload, redirects to a confirmation that needs the
token, and records the comment. There is no real Canvas here; tests/test_release.py and tests/test_newcomer_path.py
release to this one."""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "s3cret-canvas-token-for-tests"
COURSE, ASSIGNMENT = "123", "456"


# --------------------------------------------------------

class FakeCanvas:
    def __init__(self) -> None:
        self.files: dict[int, dict] = {}          # file id -> user, name, data
        self.comments: list[dict] = []            # user, text, file ids, data of each file
        self.bodies: list[bytes] = []             # every request body received, for the leak checks
        self.requests: list[tuple[str, str, bool]] = []   # method, path, whether it carried the token
        self.fail_put_for: set[str] = set()
        self.confirm_with_201 = False
        self.next_id = 1000
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"canvas": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def new_id(self) -> int:
        with self.lock:
            self.next_id += 1
            return self.next_id

    def page_of(self, user: str) -> list[bytes]:
        return [data for c in self.comments if c["user"] == user for data in c["data"]]


class _Handler(BaseHTTPRequestHandler):
    canvas: FakeCanvas
    SUBMISSION = re.compile(r"/api/v1/courses/(\w+)/assignments/(\w+)/submissions/(\w+)")

    def log_message(self, *args) -> None:   # quiet
        pass

    def _body(self) -> bytes:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.canvas.bodies.append(body)
        return body

    def _authorized(self) -> bool:
        carried = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        self.canvas.requests.append((self.command, self.path, carried))
        if not carried:
            self._json(401, {"errors": [{"message": "Invalid access token."}]},
                       {"WWW-Authenticate": 'Bearer realm="canvas-lms"'})
        return carried

    def _json(self, status: int, value: dict, headers: dict | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        for key, item in {"Content-Type": "application/json; charset=utf-8", **(headers or {})}.items():
            self.send_header(key, item)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:   # noqa: N802 -- http.server's name
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/files_api/"):
            return self._upload(path)
        body = self._body()
        if not self._authorized():
            return None
        match = re.fullmatch(self.SUBMISSION.pattern + "/comments/files", path)
        if not match or match[1] != COURSE or match[2] != ASSIGNMENT:
            return self._json(404, {"errors": [{"message": "The specified resource does not exist."}]})
        form = dict(urllib.parse.parse_qsl(body.decode()))
        assert set(form) >= {"name", "size"}, form
        ticket = self.canvas.new_id()
        self.canvas.files[ticket] = {"user": match[3], "name": form["name"], "size": int(form["size"]), "data": None}
        return self._json(200, {"upload_url": f"{self.canvas.url}/files_api/{ticket}",
                                "upload_params": {"filename": form["name"], "content_type": form.get("content_type", ""),
                                                  "upload_ticket": str(ticket)}})

    def _upload(self, path: str) -> None:
        body = self._body()
        # the upload address is not Canvas's API: the token must never travel there
        self.canvas.requests.append(("POST", path, bool(self.headers.get("Authorization"))))
        ticket = int(path.rsplit("/", 1)[1])
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
        parts = list(message.iter_parts())
        names = [p.get_param("name", header="content-disposition") for p in parts]
        assert names[-1] == "file" and names[:-1] == ["filename", "content_type", "upload_ticket"], names
        data = parts[-1].get_payload(decode=True)
        pending = self.canvas.files[ticket]
        assert len(data) == pending["size"]
        pending["data"] = data
        location = f"{self.canvas.url}/api/v1/files/{ticket}/create_success?uuid=abc"
        if self.canvas.confirm_with_201:
            self.send_response(201)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(301)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:   # noqa: N802
        if not self._authorized():
            return None
        match = re.fullmatch(r"/api/v1/files/(\d+)/create_success", urllib.parse.urlsplit(self.path).path)
        if not match or int(match[1]) not in self.canvas.files:
            return self._json(404, {"errors": [{"message": "not found"}]})
        file = self.canvas.files[int(match[1])]
        return self._json(200, {"id": int(match[1]), "display_name": file["name"], "size": file["size"],
                                "content-type": "text/html"})

    def do_PUT(self) -> None:   # noqa: N802
        body = self._body()
        if not self._authorized():
            return None
        match = self.SUBMISSION.fullmatch(urllib.parse.urlsplit(self.path).path)
        if not match:
            return self._json(404, {"errors": [{"message": "not found"}]})
        user = match[3]
        if user in self.canvas.fail_put_for:
            return self._json(500, {"errors": [{"message": "An error occurred."}]})
        form = urllib.parse.parse_qs(body.decode())
        file_ids = [int(i) for i in form.get("comment[file_ids][]", [])]
        assert all(self.canvas.files[i]["user"] == user for i in file_ids), "a file of another student"
        comment = {"id": self.canvas.new_id(), "user": user, "text": form.get("comment[text_comment]", [""])[0],
                   "file_ids": file_ids, "data": [self.canvas.files[i]["data"] for i in file_ids]}
        self.canvas.comments.append(comment)
        return self._json(200, {"id": 9, "user_id": int(user), "assignment_id": int(ASSIGNMENT),
                                "submission_comments": [{"id": comment["id"], "comment": comment["text"],
                                                         "attachments": [{"id": i} for i in file_ids]}]})


def running_canvas():
    """A FakeCanvas for the length of a test (a fixture's body: `yield from running_canvas()`)."""
    server = FakeCanvas()
    yield server
    server.server.shutdown()   # a second shutdown or close does nothing
    server.server.server_close()
