#!/usr/bin/env python3
"""An OTLP/HTTP traces sink for the benchmark: accepts `POST /v1/traces`,
answers 200 with an empty ExportTraceServiceResponse (an empty protobuf
message is zero bytes) and counts what it got. Decoding is the test
suite's business (tests/traces.rs); here only the cost of sending counts.

Prints `otlp_sink listening on ADDR` once bound (127.0.0.1, a free port);
`GET /stats` answers `{"posts": N, "bytes": M}`. Stopped by PID (bench/run
starts it with stdin closed); exits by itself after --max-lifetime
seconds (default 3600).
"""
import argparse
import http.server
import json
import threading


class Sink(http.server.BaseHTTPRequestHandler):
    posts = 0
    received = 0

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        Sink.posts += 1
        Sink.received += length
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps({"posts": Sink.posts, "bytes": Sink.received}).encode()
        self.send_response(200 if self.path == "/stats" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-lifetime", type=float, default=3600)
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    host, port = server.server_address[:2]
    print(f"otlp_sink listening on {host}:{port}", flush=True)
    timer = threading.Timer(args.max_lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()


if __name__ == "__main__":
    main()
