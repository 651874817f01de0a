#!/usr/bin/env python3
"""A/B of `lcp_cost` builds: runs each binary in turn ROUNDS times and reports the
medians of the full LCP's and the 1%-changed LCPs' times, summed from the per-step
microseconds the program prints (step 2 + step 3 + step 4; `elapsed_ms` is whole
milliseconds), of their ratio, of the partial LCPs' scan time summed over the
fragments (CPU spent holding a node's scan turn), and of the partial LCPs' step 2 and
of what follows the last scan (step 3 + step 4).

Usage: benches/lcp_ab.py ROUNDS BIN... [-- lcp_cost args]
e.g.   benches/lcp_ab.py 4 /tmp/lcp_old ./target/release/lcp_cost -- 1000000 2 2 6 1
"""
import re
import statistics
import subprocess
import sys


def main() -> None:
    argv = sys.argv[1:]
    args = ["1000000", "2", "2", "6", "1"]
    if "--" in argv:
        i = argv.index("--")
        argv, args = argv[:i], argv[i + 1 :]
    if len(argv) < 2:
        sys.exit(__doc__)
    rounds, bins = int(argv[0]), argv[1:]
    res = {b: {"full": [], "part": [], "ratio": [], "scans": [], "step2": [], "tail": []} for b in bins}
    step = re.compile(r"step 2 (\d+) us \(scans (\d+) us.*step 3 (\d+) us.*step 4 (\d+) us")
    for _ in range(rounds):
        for b in bins:
            out = subprocess.run([b, *args], capture_output=True, text=True, check=True).stdout
            lines = out.split("\n")
            full = None
            for j, line in enumerate(lines[1:], start=1):
                m = step.search(line)
                if not m:
                    continue
                s2, scans, s3, s4 = map(int, m.groups())
                total = s2 + s3 + s4
                if "full (first)" in lines[j - 1]:
                    full = total
                    res[b]["full"].append(total)
                elif "after 1%" in lines[j - 1] and full:
                    res[b]["part"].append(total)
                    res[b]["scans"].append(scans)
                    res[b]["step2"].append(s2)
                    res[b]["tail"].append(s3 + s4)
                    res[b]["ratio"].append(total / full)
    for b in bins:
        r = res[b]
        print(
            f"{b}: full median {statistics.median(r['full']):.0f} us, "
            f"1%-changed median {statistics.median(r['part']):.0f} us "
            f"(its scans {statistics.median(r['scans']):.0f} us summed; step 2 "
            f"{statistics.median(r['step2']):.0f} us, after the last scan "
            f"{statistics.median(r['tail']):.0f} us), "
            f"ratio median {statistics.median(r['ratio']):.4f} "
            f"({min(r['ratio']):.4f}-{max(r['ratio']):.4f}, n={len(r['part'])})"
        )


if __name__ == "__main__":
    main()
