"""The one part of the build that ``pyproject.toml`` cannot declare on its own: the optional C module of the request
log (``src/edgeplane/edge/row_builder.c``). Without a C compiler the install goes on without it and the request log
uses its Python loop (``edgeplane.edge.request_rows``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "edgeplane.edge.row_builder",
            sources=["src/edgeplane/edge/row_builder.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
