"""The serve tests' Python client: redis-py against `memcache-ratelimit serve`.

Usage: python_client.py PORT KEY PROTOCOL. Prints one JSON object.
"""

import json
import sys

import redis

port, key, protocol = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
r = redis.Redis(
    host="127.0.0.1", port=port, protocol=protocol, client_name="py-test", decode_responses=True
)
out = {"ping": r.ping()}
out["reduce"] = [r.execute_command("RL.REDUCE", key, 2, 60) for _ in range(3)]
pipe = r.pipeline(transaction=False)
for _ in range(5):
    pipe.execute_command("RL.PREDUCE", key + ":p", 5, 60000)
out["pipelined"] = pipe.execute()
out["throttle"] = r.execute_command("CL.THROTTLE", key, 15, 30, 60, 1)
out["window"] = r.execute_command("RL.WINDOW", key, 2, 60)
try:
    r.execute_command("RL.REDUCE", key, "x", 60)
except redis.ResponseError as error:
    out["error"] = str(error)
out["name"] = r.client_getname()
r.close()
print(json.dumps(out))
