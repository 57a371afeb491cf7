# file-name: b'zstandard.py'
# Threat: named after a module JAX tries to import lazily (its compilation cache's `import zstandard`). Imported
# while the grader sets a run up, it forges the grader's set-up report ("No space left on device") to be excused;
# run as the submission, it first closes its pipes and lingers, hoping the fork server is taken for dead and the run
# retried in a fresh interpreter, where JAX imports modules like it during set-up.
import os
import time

if __name__ != "__main__":
    for fd in (4, 3):
        try:
            os.write(fd, b'{"setup": "failed", "message": "OSError: [Errno 28] No space left on device"}\n')
        except OSError:
            pass
    raise ImportError("no zstandard here")
for fd in (1, 2, 3):
    os.close(fd)
time.sleep(5)
