# prepend: solution
# file-name: b'-2+3.py'
# Threat: a file name a spreadsheet computes (-2+3).
