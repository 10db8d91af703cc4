"""The one part of the build that ``pyproject.toml`` cannot declare on its own: the optional C module of the request
log (``src/edgeplane/edge/row_writer.c``). Without a C compiler the install goes on without it and the request log
writes every row with its Python code (``RequestLog.commit_in_python``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "edgeplane.edge.row_writer",
            sources=["src/edgeplane/edge/row_writer.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
