"""The one check of the operating system: whether this is a POSIX system (Linux, macOS) or not (Windows).

Everything POSIX-only or Linux-only the grader uses sits behind `POSIX`, read when it is used (never when a module is
imported, so that importing any module of the student's check needs nothing a Windows Python lacks): process
groups and sessions (`os.killpg`, `start_new_session`), the rlimits a run sets on itself (`resource`), file locks by
`fcntl`, owners and modes of the cache folder, and on Linux the sandbox's parts (bubblewrap, cgroups, the syscall
filter, the fork server, wider pipes, /proc). Where `POSIX` is False, a student's check runs by the portable
strategy alone (sandbox/portable.py), with nothing but what Python offers on every system: subprocess pipes, threads
and `Popen.kill`. Python's own answer is `os.name`; tests set `POSIX` to take the other branch
(tests/test_windows_path.py runs the check on Linux as on Windows).
"""

from __future__ import annotations

import os

POSIX = os.name == "posix"
