# file-name: b'numpy.py'
# Threat: named after NumPy itself, imported while a fresh interpreter sets the run up. Imported then, it forges the grader's set-up report on the control pipe
# (fd 4), hoping to be excused for a file that does no work.
import os

if __name__ != "__main__":
    os.write(4, b'{"setup": "failed", "message": "OSError: [Errno 28] No space left on device"}\n')
    raise ImportError("not numpy")
print("ran as the submission")
