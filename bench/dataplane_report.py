"""The tables ``dataplane.py`` prints (records/s against the reference; CPU and memory side by side with
each target's verdict; concurrent pipelines) and the figures it saves for the documentation's charts."""

from __future__ import annotations

import results as bench_results
from file_pipeline import Result
from proc_tree import mib


def print_table(results: list[Result]) -> None:
    reference = next((r.rate for r in results if r.system.startswith("reference")), None)
    print(f"\n{'system':40} {'records':>10} {'seconds':>8} {'rec/s':>10} {'x reference':>11}  note")
    for r in results:
        seconds = f"{r.seconds:.1f}" if r.seconds else "-"
        rate = f"{r.rate:,.0f}" if r.rate else "-"
        ratio = f"{r.rate / reference:.2f}" if r.rate and reference else "-"
        print(f"{r.system:40} {r.records:>10,} {seconds:>8} {rate:>10} {ratio:>11}  {r.note}")
    for r in results:
        if r.memory:
            print(f"\nresident memory, {r.system}:")
            for what, value in r.memory.items():
                print(f"    {what:28} {value:>9}")


def _cpu_row(r: Result) -> str:
    """Seconds, rec/s, CPU s of the worker, of Spark, in all, µs per record, broker CPU s, peak RSS."""
    if not r.seconds or not r.cpu:
        return f"{'-':>7} {'-':>8} {'-':>8} {'-':>8} {'-':>8} {'-':>7} {'-':>8} {'-':>9}  {r.note}"
    below = f"{r.cpu['below']:.1f}" if r.side != "reference" else "-"
    total = r.cpu["root"] + r.cpu["below"]
    return (
        f"{r.seconds:7.1f} {r.rate:8,.0f} {r.cpu['root']:8.1f} {below:>8} {total:8.1f} "
        f"{total * 1e6 / r.records:7.1f} {r.cpu['broker']:8.1f} {mib(r.peak_rss):>9}  {r.note}"
    )


CPU_HEADER = (
    f"{'wall s':>7} {'rec/s':>8} {'cpu wrk':>8} {'cpu spk':>8} {'cpu all':>8} {'µs/rec':>7} "
    f"{'broker':>8} {'peak RSS':>9}"
)


def print_side_by_side(results: list[Result]) -> None:
    """kconnect against the reference, plain and with two transforms, and the verdict on each target."""
    rows = [r for r in results if r.side in ("kconnect", "reference")]
    if rows:
        print(
            "\nside by side (cpu wrk: the worker process, for the reference its JVM; cpu spk: kconnect's "
            "Spark JVM and\nPython workers; cpu all: both; µs/rec: cpu all per record; broker: the "
            "embedded broker's CPU s, not in cpu all;\npeak RSS: the worker's whole process tree)"
        )
        print(f"{'variant':11} {'system':40} {CPU_HEADER}")
        for variant in ("plain", "transforms"):
            for r in (r for r in rows if r.variant == variant):
                print(f"{variant:11} {r.system:40} {_cpu_row(r)}")
    for variant in ("plain", "transforms"):
        ref = next((r for r in rows if r.variant == variant and r.side == "reference"), None)
        if ref is None or not ref.seconds or not ref.cpu:
            continue
        ref_us = (ref.cpu["root"] + ref.cpu["below"]) * 1e6 / ref.records
        for kc in (r for r in rows if r.variant == variant and r.side == "kconnect"):
            if not kc.seconds or not kc.cpu or not kc.rate or not ref.rate:
                continue
            us = (kc.cpu["root"] + kc.cpu["below"]) * 1e6 / kc.records
            ratio = kc.rate / ref.rate
            print(f"\n{kc.system} against {ref.system}:")
            print(
                f"    CPU per record {us:.1f} µs vs {ref_us:.1f} µs ({us / ref_us:.2f}x): "
                f"at most the reference's? {'yes' if us <= ref_us else 'NO'}"
            )
            print(
                f"    wall {kc.seconds:.1f} s vs {ref.seconds:.1f} s ({kc.seconds / ref.seconds:.2f}x): "
                f"at most half ({ref.seconds / 2:.1f} s)? {'yes' if kc.seconds <= ref.seconds / 2 else 'NO'}"
            )
            print(
                f"    end to end {ratio:.2f}x the reference's records/s: at least 2x? "
                f"{'yes' if ratio >= 2 else 'NO'}"
            )
    pipes = [r for r in results if r.side == "pipelines"]
    if pipes:
        print("\nconcurrent FileStream pipelines on one kconnect worker (local[2]), aggregate:")
        print(f"{'pipelines':>9} {'records':>10} {CPU_HEADER}")
        for r in pipes:
            print(f"{r.variant:>9} {r.records:>10,} {_cpu_row(r)}")


#: The chart's title on the documentation site's benchmarks page.
TITLE = "One big pipeline: file -> Kafka -> file (bench/dataplane.py)"


def figures_of(results: list[Result], records: int) -> list[bench_results.Figure]:
    """The side-by-side rows' figures for ``bench/results/dataplane.json``: wall time, records/s, CPU per
    record and peak RSS, kconnect beside the reference, plain and with two transforms. A kconnect row is
    named ``kconnect`` when it is the only one of its variant (one ``--group-protocol``), else by its
    label."""
    shapes = {
        "plain": f"{records:,} records, FileStream file -> Kafka -> file",
        "transforms": f"{records:,} records, 2 transforms on the sink",
    }
    figures = []
    for r in results:
        if r.side not in ("kconnect", "reference") or r.variant not in shapes or not r.seconds or not r.rate:
            continue
        alone = sum(1 for o in results if o.side == r.side and o.variant == r.variant) == 1
        system = "kconnect" if r.side == "kconnect" and alone else bench_results.system_name(r.system)
        shape = shapes[r.variant]
        figures.append(bench_results.figure(system, shape, "wall time", round(r.seconds, 1), "s"))
        figures.append(bench_results.figure(system, shape, "records/s", round(r.rate), "records/s"))
        if r.cpu:
            us = (r.cpu["root"] + r.cpu["below"]) * 1e6 / r.records
            figures.append(bench_results.figure(system, shape, "CPU per record", round(us, 1), "µs"))
        if r.peak_rss:
            figures.append(bench_results.figure(system, shape, "peak RSS", r.peak_rss // 1024, "MiB"))
    return figures
