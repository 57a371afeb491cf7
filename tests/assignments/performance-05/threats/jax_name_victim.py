# prepend: solution
# file-name: b'jax.py'
# An honest submission saved as jax.py, named after JAX itself. Never imported as jax.
