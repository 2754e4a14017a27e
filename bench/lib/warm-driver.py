"""Warm start inside a sandbox (benchmark 7): start `opencode serve`, warm it up, say READY, then wait
for the task to be handed over as a file in the workspace (the only way in: the sandbox reaches
nothing but the gateway), prompt it through the server's HTTP API on the sandbox's own loopback,
wait for the session to go idle and print the last text. argv: bin port workdir provider model."""
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

BIN, PORT, WORKDIR, PROVIDER, MODEL = sys.argv[1:6]
BASE = f"http://127.0.0.1:{PORT}"
Q = "?directory=" + urllib.parse.quote(WORKDIR)


def call(method, path, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, method=method, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read()
        return json.loads(text) if text else None


server = subprocess.Popen([BIN, "serve", "--port", PORT, "--hostname", "127.0.0.1"], cwd=WORKDIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    while True:
        try:
            # A short timeout: a request that reaches the server before it is ready can go unanswered.
            call("GET", "/global/health", timeout=1)
            break
        except Exception:
            time.sleep(0.02)
    print("LISTENING", flush=True)
    call("GET", "/config" + Q)
    call("GET", "/agent" + Q)
    call("POST", "/session" + Q, {"title": "warm-up"})
    print("READY", flush=True)
    task_file = os.path.join(WORKDIR, "task.json")
    while True:
        try:
            with open(task_file) as f:
                task = json.load(f)
            break
        except (OSError, ValueError):
            time.sleep(0.005)
    session = call("POST", "/session" + Q, {"title": task["title"]})
    parts = [{"type": "text", "text": task["prompt"]}, {"type": "file", "mime": task["mime"], "filename": os.path.basename(task["image"]), "url": "file://" + task["image"]}]
    call("POST", f"/session/{session['id']}/prompt_async" + Q, {"model": {"providerID": PROVIDER, "modelID": MODEL}, "parts": parts})
    busy = False
    deadline = time.time() + 300
    while time.time() < deadline:
        state = call("GET", "/session/status" + Q).get(session["id"], {}).get("type", "idle")
        busy = busy or state != "idle"
        if busy and state == "idle":
            break
        time.sleep(0.05)
    messages = call("GET", f"/session/{session['id']}/message" + Q)
    texts = [p.get("text", "") for m in messages for p in m["parts"] if p.get("type") == "text"]
    print("ANSWER " + json.dumps(texts[-1] if texts else ""), flush=True)
finally:
    server.terminate()
    try:
        server.wait(5)
    except subprocess.TimeoutExpired:
        server.kill()
