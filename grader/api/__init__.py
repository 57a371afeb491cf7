"""What check authors import: value coercions (`values`) and method-evidence questions (`methods`).

How to write a check, what `run` offers and how to credit a method by origin rather than presence:
docs/writing-checks.md.
"""
