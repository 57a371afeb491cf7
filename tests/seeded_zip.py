"""The autograder zip with its variant seed fixed, so paths compared in a test grade the same variant.

Without it each path draws its own seed, and feedback that names the run whose analysis is missing
(plain or remat, by the seed's parity) differs by chance. A test whose cases run to their time limits may also
tighten the limits the zip's assignment gives (the same way test_threats.py tightens the batch's)."""

import json
import re
import zipfile
from pathlib import Path

from grader.lms.autograder_zip import PLUGIN_NAME

SEED = 424242


def with_seed(built: Path, target: Path, limits: dict[str, float] | None = None) -> Path:
    """The zip with the variant seed fixed (otter_config.json), so the three paths grade the same variant, and
    with `limits` (the `[limits]` keys of assignment.toml) replaced where given."""
    with zipfile.ZipFile(built) as source, zipfile.ZipFile(target, "w") as copy:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "otter_config.json":
                config = json.loads(data)
                config["plugins"][0][PLUGIN_NAME]["variant_seed"] = SEED
                data = json.dumps(config).encode()
            elif limits and info.filename.endswith("/assignment.toml"):
                data = _with_limits(data.decode("utf-8"), limits).encode("utf-8")
            copy.writestr(info, data)
    return target


def _with_limits(toml: str, limits: dict[str, float]) -> str:
    """Each key's value in the `[limits]` table replaced; a key that is not there exactly once is an error, so a
    renamed limit cannot leave a test quietly running with the class's."""
    head, table, rest = toml.partition("\n[limits]")
    body, next_table, tail = rest.partition("\n[")
    for key, value in limits.items():
        body, count = re.subn(rf"(?m)^{re.escape(key)}\s*=\s*[0-9_.]+", f"{key} = {value}", body)
        if count != 1:
            raise ValueError(f"[limits] {key}: found {count} times in the zip's assignment.toml")
    return head + table + body + next_table + tail
