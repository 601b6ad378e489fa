"""A job's web app for the port proxy's tests: HTTP and WebSocket on $GANTRY_PORT_WEB.

GET PREFIX/ (an HTML page) opens a WebSocket to PREFIX/ws, sends "hi" and shows the echo
and the cookies its script can read; other paths answer JSON with what the app was sent
(path, headers, body, its prefix variable) and set two cookies, one in Gantry's name; a
path ending in /garbage answers bytes that are not HTTP. Standard library only.
"""
import base64
import hashlib
import http.server
import json
import os

PREFIX = os.environ.get("GANTRY_PORT_WEB_PREFIX", "")
PAGE = """<!doctype html><meta charset=utf-8><title>job app</title>
<p id=cookies></p><p id=out>waiting</p>
<script>
document.getElementById('cookies').textContent = 'cookies:' + document.cookie;
const ws = new WebSocket(location.href.replace(/^http/, 'ws').replace(/[?#].*$/, '') + 'ws');
ws.onopen = () => ws.send('hi');
ws.onmessage = (e) => { document.getElementById('out').textContent = e.data; };
ws.onerror = () => { document.getElementById('out').textContent = 'websocket failed'; };
</script>
"""


class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(
            hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:  # echo each text frame as "echo:TEXT"
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, size = head[0] & 0x0F, head[1] & 0x7F
            if size == 126:
                size = int.from_bytes(self.rfile.read(2), "big")
            elif size == 127:
                size = int.from_bytes(self.rfile.read(8), "big")
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(size)))
            if opcode == 8:
                return
            out = ("echo:" + data.decode()).encode()
            self.wfile.write(bytes([0x81, len(out)]) + out)
            self.wfile.flush()

    def answer(self, body_in):
        if self.path.endswith("/garbage"):
            self.wfile.write(b"this is not HTTP\r\n\r\n")
            self.close_connection = True
            return
        if self.path.split("?")[0] == PREFIX + "/":
            body, kind = PAGE.encode(), "text/html; charset=utf-8"
        else:
            body = json.dumps({"path": self.path, "method": self.command, "headers": dict(self.headers.items()),
                               "body": body_in.decode(errors="replace"), "prefix": PREFIX,
                               "token": os.environ.get("GANTRY_PORT_TOKEN", "")}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "gantry_port=from-the-job; Path=/")
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        self.answer(b"")

    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))


http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["GANTRY_PORT_WEB"])), App).serve_forever()
