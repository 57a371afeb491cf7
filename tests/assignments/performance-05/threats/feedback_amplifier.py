# prepend: solution
# Threat: a value the checks quote whole in their feedback (the last panel's bars), a string of 900,000 characters,
# and the same value in the figure data: the record and every page of it must stay small (record_limits.py).
huge = "y" * 900_000
panels[-1] = dict(panels[-1], series=[dict(panels[-1]["series"][0], y=huge)])
visual_data = {"kind": "panels", "panels": panels}
