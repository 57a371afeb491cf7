# prepend: solution
# file-name: b'name_case_twin.PY'
# Threat: `.PY` beside `name_case_twin_lower`'s sibling: ids never collide or move.
