"""MP/GMP coefficients in fixed point (placeholder: written in the next commit)."""


class PolyFixedError(ValueError):
    """An MP/GMP run cannot be exported in fixed point."""


def export_poly_fixed(*args, **kwargs):
    raise PolyFixedError("MP/GMP fixed-point export is not available yet")
