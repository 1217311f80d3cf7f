"""Reads the gateways' Prometheus /metrics: the encode / communicate / decode split and the ratio.

scrape(url) fetches and parses one exposition (prometheus_client's parser, Debian
python3-prometheus-client); phase_split() sums the histograms gradgate_{encode,communicate,
decode}_seconds over their labels and over gateways; ratios() reads the achieved and the target
ratio gauges. Every value is as the gateways measured it; a gateway that cannot be reached gives
None, never an exception, so that a dying run still reports what it can.
"""

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

PHASES = ("encode", "communicate", "decode")
# Counters kept by label too (scrape() sums labels away otherwise).
LABELLED = ("gradgate_errors_total",)
# The kinds of gradgate_errors_total that are failed all-reduces (a skipped step, nonfinite_gradient,
# is not a failure; the transport's and the ingress's kinds are not all-reduces).
FAILED_ALLREDUCE_KINDS = ("timeout", "aborted", "unavailable", "incompatible", "malformed_frame",
                          "checksum_mismatch", "invalid_argument", "resource_exhausted",
                          "not_found", "unsupported", "internal")
SCRAPE_TIMEOUT_S = 3.0


def scrape(url):
    """{sample name: summed value} of one /metrics page (labels summed away), or None."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError, ValueError):
        return None
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
            if sample.name in LABELLED:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                values[key] = values.get(key, 0.0) + sample.value
    return values


def phase_split(scrapes):
    """{phase: {"seconds", "count"}} summed over the gateways' scrapes (None entries skipped)."""
    split = {}
    for phase in PHASES:
        name = f"gradgate_{phase}_seconds"
        split[phase] = {
            "seconds": sum(s.get(f"{name}_sum", 0.0) for s in scrapes if s),
            "count": int(sum(s.get(f"{name}_count", 0.0) for s in scrapes if s)),
        }
    return split


def byte_totals(scrapes):
    """Raw and wire bytes the gateways counted (their own view, next to the interfaces')."""
    return {
        "raw_bytes": int(sum(s.get("gradgate_raw_bytes_total", 0.0) for s in scrapes if s)),
        "wire_bytes": int(sum(s.get("gradgate_wire_bytes_total", 0.0) for s in scrapes if s)),
    }


def link_faults(scrapes):
    """What the gateways' links went through: all-reduces that failed, connections re-established
    under a live session, bytes written again, peers reported down (summed over the gateways)."""
    answered = [s for s in scrapes if s]
    failed = sum(s.get(("gradgate_errors_total", (("kind", kind),)), 0.0)
                 for s in answered for kind in FAILED_ALLREDUCE_KINDS)
    total = lambda name: int(sum(s.get(name, 0.0) for s in answered))  # noqa: E731
    return {
        "failed_allreduces": int(failed),
        "reconnects": total("gradgate_transport_reconnects_total"),
        "resent_bytes": total("gradgate_transport_resent_bytes_total"),
        "peers_down": total("gradgate_peers_down_total"),
    }


def ratios(scrapes):
    """Mean achieved and target ratio over the gateways that answered (None when none did)."""
    answered = [s for s in scrapes if s]
    if not answered:
        return {"ratio": None, "target_ratio": None}
    mean = lambda name: sum(s.get(name, 0.0) for s in answered) / len(answered)  # noqa: E731
    return {
        "ratio": mean("gradgate_compression_ratio"),
        "target_ratio": mean("gradgate_target_ratio"),
    }
