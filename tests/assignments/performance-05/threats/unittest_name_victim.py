# prepend: solution
# file-name: b'unittest.py'
# An honest submission saved as unittest.py, named after a standard-library module imported lazily while the
# student's code runs. Never imported as unittest.
