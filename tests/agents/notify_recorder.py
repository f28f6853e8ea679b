"""A `[notify] command` for the tests: writes its argv and stdin as JSON to $NOTIFY_RECORD.

--exit N: exit N after recording (and say so on stderr); --hang: start a grandchild, then sleep
(a command that never ends: drover must end its whole process group)."""
import json
import os
import subprocess
import sys
import time

data = sys.stdin.read()
with open(os.environ["NOTIFY_RECORD"], "w", encoding="utf-8") as out:
    json.dump({"argv": sys.argv[1:], "stdin": data}, out)
if "--hang" in sys.argv:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    time.sleep(300)
if "--exit" in sys.argv:
    code = int(sys.argv[sys.argv.index("--exit") + 1])
    print(f"notify recorder: told to exit {code}", file=sys.stderr)
    sys.exit(code)
