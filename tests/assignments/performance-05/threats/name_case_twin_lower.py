# prepend: solution
# file-name: b'name_case_twin.py'
# The honest twin of name_case_twin (.PY).
