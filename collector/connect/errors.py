"""How a connect flow fails: one `ConnectError` whose `kind` says which way, and whose message is one printable line
that never holds a secret (a client secret, a code, a verifier, a token)."""

from __future__ import annotations

from ..exitcodes import EXIT_NO, EXIT_USAGE

SETTINGS = "settings"  # the application's credentials are not configured
DENIED = "denied"  # the person said no
EXPIRED = "expired"  # the code or the flow's time ran out
STATE = "state"  # the answer does not belong to this flow (state, token)
ACCOUNT = "account"  # renewing with another account than the network's
UNREACHABLE = "unreachable"  # the service did not answer
MALFORMED = "malformed"  # an answer the flow cannot read
REFUSED = "refused"  # the service refused the request (its error named)
KINDS = (SETTINGS, DENIED, EXPIRED, STATE, ACCOUNT, UNREACHABLE, MALFORMED, REFUSED)


class ConnectError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def exit_code(self) -> int:
        """Settings to set: 2 (usage or settings); any other failure: 1 (the command ran and the answer is no)."""
        return EXIT_USAGE if self.kind == SETTINGS else EXIT_NO
