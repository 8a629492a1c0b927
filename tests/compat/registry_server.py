#!/usr/bin/env python3
"""A Schema Registry REST server for tests: serves the subjects of a fixture manifest
(tests/fixtures/schemas-v1/manifest.json) as Confluent Schema Registry answers them.

    registry_server.py MANIFEST USER:PASSWORD

Listens on 127.0.0.1 (a free port), prints the port on stdout, and serves until killed:
GET /schemas/ids/{id}, /subjects, /subjects/{subject}/versions,
/subjects/{subject}/versions/{version|latest}. Every request must carry HTTP basic auth with
USER:PASSWORD (401 otherwise). Soft-deleted versions are not listed and not the latest, as the
registry answers; they are still found by id. Answers and error bodies are the registry's
(error_code 40401 subject not found, 40402 version not found, 40403 schema not found).
"""

import base64
import http.server
import json
import sys
import urllib.parse


def main():
    manifest = json.load(open(sys.argv[1]))
    expected = "Basic " + base64.b64encode(sys.argv[2].encode()).decode()
    subjects = manifest["subjects"]

    def schema_fields(s):
        out = {"schema": s["schema"]}
        if s.get("schemaType", "AVRO") != "AVRO":
            out["schemaType"] = s["schemaType"]
        if s.get("references"):
            out["references"] = s["references"]
        return out

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.headers.get("Authorization") != expected:
                return self.answer(401, {"error_code": 401, "message": "Unauthorized"})
            parts = [urllib.parse.unquote(p) for p in self.path.split("?")[0].split("/") if p]
            live = [s for s in subjects if not s["deleted"]]
            if parts[:2] == ["schemas", "ids"] and len(parts) == 3:
                for s in subjects:
                    if str(s["id"]) == parts[2]:
                        return self.answer(200, schema_fields(s))
                return self.answer(404, {"error_code": 40403, "message": "Schema not found"})
            if parts == ["subjects"]:
                return self.answer(200, sorted({s["subject"] for s in live}))
            if len(parts) >= 3 and parts[0] == "subjects" and parts[2] == "versions":
                mine = sorted((s for s in live if s["subject"] == parts[1]), key=lambda s: s["version"])
                if not mine:
                    return self.answer(404, {"error_code": 40401, "message": "Subject not found"})
                if len(parts) == 3:
                    return self.answer(200, [s["version"] for s in mine])
                want = mine[-1] if parts[3] == "latest" else next(
                    (s for s in mine if str(s["version"]) == parts[3]), None)
                if want is None:
                    return self.answer(404, {"error_code": 40402, "message": "Version not found"})
                body = {"subject": want["subject"], "version": want["version"], "id": want["id"]}
                body.update(schema_fields(want))
                return self.answer(200, body)
            return self.answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
