# prepend: solution
# file-name: b'=HYPERLINK("evil.example","click").py'
# Threat: a file name that is a spreadsheet formula.
