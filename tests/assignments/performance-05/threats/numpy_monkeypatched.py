# prepend: solution
# Threat: silence numpy's comparison helpers inside the student process, then submit wrong answers.
# inside: directional
import numpy as _np
import numpy.testing as _npt

def _always(*args, **kwargs):
    return True

def _never_raise(*args, **kwargs):
    return None

_np.allclose = _np.isclose = _np.array_equal = _np.array_equiv = _always
_npt.assert_allclose = _npt.assert_array_equal = _npt.assert_almost_equal = _npt.assert_array_almost_equal = _never_raise
_np.testing.assert_allclose = _never_raise
finite = automatic * 1.5
# inside: hvp
hvp_plain = hvp_plain * 3.0
hvp_remat = hvp_remat * 3.0
