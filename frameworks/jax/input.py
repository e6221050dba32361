"""bench=input for JAX: the grain pipeline of data=files alone, no model
(frameworks/jax/loader.py; docs/data.md)."""
from frameworks.jax.loader import InputSession


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("grain",)
