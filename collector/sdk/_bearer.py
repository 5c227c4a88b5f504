"""The bearer token's authentication (sdk/auth.py exports it), apart so that the lane's request head
(sdk/_polls.py) can recognise it without importing what the declarations import."""

from __future__ import annotations

import requests
from requests.auth import AuthBase


class BearerAuth(AuthBase):
    """`Authorization: <scheme> <token>`."""

    def __init__(self, token: str, scheme: str = "Bearer"):
        self.token, self.scheme = token, scheme

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"{self.scheme} {self.token}"
        return request
