"""An assignment's config: loading it and validating it."""
