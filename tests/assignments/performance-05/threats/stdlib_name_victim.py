# prepend: solution
# file-name: b'copy.py'
# An honest submission saved as copy.py, named after a standard-library module JAX imports while a fresh
# interpreter sets the run up (an honest copy.py once scored 19/100 on the LMS path). Never imported as copy.
