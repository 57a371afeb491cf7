"""What check authors import: value coercions and method-evidence questions."""
