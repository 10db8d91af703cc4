"""Driving an ``EdgeRouter`` without a server: what ``HttpServer`` does with one request that passed its head."""

from __future__ import annotations

from edgeplane.edge.http_server import EdgeRequest, EdgeResponse, encode_response
from edgeplane.edge.router import EdgeRouter


async def answer_through(router: EdgeRouter, request: EdgeRequest) -> EdgeResponse:
    """The router's answer to ``request`` (awaited when it is not at hand), committed as before the write."""
    answer = router.handle(request)
    response = answer if isinstance(answer, EdgeResponse) else await answer
    _send(router, request, response)
    return response


async def answer_request(router: EdgeRouter, request: EdgeRequest) -> EdgeResponse:
    """What ``HttpServer`` does with a whole request: the router's answer from the head when it has one, else
    ``answer_through``."""
    early = router.answer_head(request)
    if early is None:
        return await answer_through(router, request)
    _send(router, request, early)
    return early


def _send(router: EdgeRouter, request: EdgeRequest, response: EdgeResponse) -> None:
    """What ``HttpServer`` does before the write of an answer: ``commit_answer``."""
    router.commit_answer(request, response, len(encode_response(response, keep_alive=True, http_10=False)))
