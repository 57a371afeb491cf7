# prepend: solution
# file-name: b'caf\xe9.py'
# Threat: a Latin-1 file name (byte 0xe9, not UTF-8), as an old zip tool extracts it.
