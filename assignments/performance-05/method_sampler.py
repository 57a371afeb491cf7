# Method sampler for performance-05 (public: the lesson page prints the solution, and these are its exercises computed
# the other common honest ways). A large batch runs it once per world right after the public solution, in the trusted
# warm-up, so JAX compiles these programs into the cache every run reads and honest runs written these ways compile
# little of their own. Nothing here is graded; every form is tried on its own and may fail without consequence.
def _grader_method_sampler():
    from jax.experimental import jet as _jet

    _ones, _tangent = jnp.ones_like(x), jnp.linspace(-1.0, 1.0, len(x))
    _forms = [
        lambda: jax.jvp(plain, (x,), (_ones,)),
        lambda: jax.linearize(plain, x)[1](_ones),
        lambda: jax.vjp(plain, x)[1](jnp.ones(())),
        lambda: jax.value_and_grad(plain)(x),
        lambda: jax.jacfwd(plain)(x),
        lambda: _jet.jet(plain, (x,), ((_ones,),)),
        lambda: jax.jit(jax.grad(plain))(x),
        lambda: jax.vmap(plain)(jnp.stack([x + 1e-3 * _ones, x - 1e-3 * _ones])),
        lambda: jax.jit(plain)(x + 1e-3 * _ones),
        # the directional derivatives in JAX arithmetic rather than Python floats
        lambda: (plain(x + 1e-3 * _tangent) - plain(x - 1e-3 * _tangent)) / (2 * 1e-3),
        lambda: [plain(_p) for _p in jnp.stack([x + 1e-3 * _tangent, x - 1e-3 * _tangent])],
        lambda: jax.grad(plain)(x) @ _tangent,
        lambda: jnp.dot(jax.grad(plain)(x), _tangent),
    ]
    for _f in (plain, remat):
        _forms += [
            lambda _f=_f: jax.hessian(_f)(x) @ _tangent,
            lambda _f=_f: jax.jacfwd(jax.jacrev(_f))(x) @ _tangent,
            lambda _f=_f: jax.jacrev(jax.jacrev(_f))(x) @ _tangent,
            lambda _f=_f: jax.grad(lambda _y: jnp.vdot(jax.grad(_f)(_y), _tangent))(x),
            lambda _f=_f: jax.linearize(jax.grad(_f), x)[1](_tangent),
            lambda _f=_f: jax.vjp(jax.grad(_f), x)[1](_tangent),
            lambda _f=_f: jax.jit(lambda _t: jax.jvp(jax.grad(_f), (x,), (_t,))[1])(_tangent),
        ]
    for _form in _forms:
        try:
            jax.block_until_ready(_form())
        except Exception:
            pass


_grader_method_sampler()
del _grader_method_sampler
