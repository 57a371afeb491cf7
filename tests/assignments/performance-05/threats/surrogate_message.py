# prepend: solution
# Threat: a lone surrogate in an exception message. JSON carries "\ud800" from the sandbox; no UTF-8 writer takes
# it. It must not stop this student's feedback, the class files (grades.csv, canvas.csv, final_grades.csv,
# report.html) or a re-run: the parent makes every text valid (U+FFFD) where it enters and where it is written.
raise ValueError("\ud800")
