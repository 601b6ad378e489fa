"""Errors of the Gantry SDK: an answer the server refused, or a server that was not reached."""


class GantryError(Exception):
    """The server refused a request: `status` (HTTP), `code` and `field` as the API names them."""

    def __init__(self, status, message, code="", field=""):
        super().__init__(f"{field}: {message}" if field else message)
        self.status = status
        self.code = code
        self.field = field
        self.message = message


class GantryUnreachable(GantryError):
    """No answer: the server is down, or the address is wrong (status 0)."""

    def __init__(self, message):
        super().__init__(0, message, "unreachable")
