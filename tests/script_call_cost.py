"""What a script call costs Redis before the script does anything: its chunk, run whole on every
call, defines every helper its includes carry (a measuring tool behind docs/benchmarks.md, not a
test).

    python3 tests/script_call_cost.py <port> <tree> [<tree>...] -- <script>...

For each script of each tree, the expanded source is cut right after its includes
(``do return 1 end`` before the script's own first line) and called 4,000 times with EVALSHA on
the private ``redis-server`` on ``port``; the server's CPU per call (``INFO cpu``) less that of
a bare ``return 1``, the minimum of 3 rounds that alternate the trees. Each tree is imported in
a child process, so two checkouts compare side by side.
"""

from __future__ import annotations

import json
import subprocess
import sys

import redis

CUT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from mooncake_redis.lua_loader import load_all, lua_dir
out = {}
for name in sys.argv[2:]:
    src = load_all()[name].source(False)
    lines = (lua_dir() / f"{name}.lua").read_text().split("\\n")
    last = max(i for i, line in enumerate(lines) if line.startswith("--!include"))
    first = next(x for x in lines[last + 1 :] if x.strip() and not x.startswith("--"))
    pos = src.rfind(first)
    assert pos > 0, name
    out[name] = src[:pos] + "\\ndo return 1 end\\n" + src[pos:]
print(json.dumps(out))
"""


def main(port: int, trees: list[str], names: list[str]) -> None:
    r = redis.Redis(port=port)

    def cpu() -> float:
        info = r.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def per_call(src: str, n: int = 4000) -> float:
        sha = r.script_load(src)
        assert r.evalsha(sha, 1, "k") == 1  # the cut script ran to its return
        c0 = cpu()
        for _ in range(n):
            r.evalsha(sha, 1, "k")
        return (cpu() - c0) / n * 1e6

    cut = {t: json.loads(subprocess.run([sys.executable, "-c", CUT, t, *names], check=True,
                                        capture_output=True, text=True).stdout)
           for t in trees}  # fmt: skip
    best: dict[tuple[str, str], float] = {}
    bare = float("inf")
    for _ in range(3):
        bare = min(bare, per_call("return 1"))
        for name in names:
            for t in trees:
                best[t, name] = min(best.get((t, name), float("inf")), per_call(cut[t][name]))
    print(f"bare 'return 1': {bare:.1f} us of server CPU per call")
    for name in names:
        row = ", ".join(f"{t}: {best[t, name] - bare:5.1f}" for t in trees)
        print(f"  {name:18s} us over bare: {row}")


if __name__ == "__main__":
    args = sys.argv[1:]
    sep = args.index("--")
    main(int(args[0]), args[1:sep], args[sep + 1 :])
