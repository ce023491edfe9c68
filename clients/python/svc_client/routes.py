"""The route table the coverage test checks against /openapi.json, and the helpers every method
group shares: `route` marks a method as the client's call of one (method, route), `omit_none` drops
the optional fields a caller left out."""

# (method, route) -> Client method.
ROUTES = {}


def route(method, path):
    def mark(fn):
        ROUTES[(method, path)] = fn.__name__
        return fn

    return mark


def omit_none(**given):
    return {k: v for k, v in given.items() if v is not None}
