"""Which host processes are alive: shared by the tests that assert a sandbox left nothing behind."""

from __future__ import annotations

from pathlib import Path


def processes_with(*tokens: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line contains any of `tokens`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if any(token in cmdline for token in tokens) and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found
